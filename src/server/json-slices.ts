/**
 * Where the elements of one top-level array sit in a JSON text, so that the log route can store
 * each trajectory group as the client sent it instead of serializing it again (which cost about
 * as much as parsing the whole body).
 */

const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \
const COMMA = 0x2c; // ,
const COLON = 0x3a; // :
const OPEN_BRACE = 0x7b; // {
const CLOSE_BRACE = 0x7d; // }
const OPEN_BRACKET = 0x5b; // [
const CLOSE_BRACKET = 0x5d; // ]

/** What a character is to the scan inside an element: 0 nothing, 1 a quote, 2 an opening, 3 a closing bracket. */
const DEEP = new Uint8Array(65536);
DEEP[QUOTE] = 1;
DEEP[OPEN_BRACE] = 2;
DEEP[OPEN_BRACKET] = 2;
DEEP[CLOSE_BRACE] = 3;
DEEP[CLOSE_BRACKET] = 3;

/**
 * The index just past the array or object that opens at `start` (the text is valid JSON), or -1.
 * Only strings and brackets matter here, so one table lookup per character decides.
 */
function endOfNested(text: string, start: number): number {
  let depth = 1;
  let position = start + 1;
  const length = text.length;
  while (position < length) {
    const kind = DEEP[text.charCodeAt(position)];
    if (kind === 0) {
      position += 1;
    } else if (kind === 1) {
      position = endOfString(text, position);
      if (position < 0) return -1;
    } else {
      position += 1;
      if (kind === 2) depth += 1;
      else {
        depth -= 1;
        if (depth === 0) return position;
      }
    }
  }
  return -1;
}

/** The index just past the closing quote of the string that opens at `start`, or -1. */
function endOfString(text: string, start: number): number {
  let position = start + 1;
  for (;;) {
    const quote = text.indexOf('"', position);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return quote + 1;
    position = quote + 1;
  }
}

/**
 * The `[start, end)` text ranges of the elements of the array that is the value of top-level key
 * `key` in `text` (its last occurrence, as `JSON.parse` keeps the last), trimmed of whitespace.
 * `text` must already be known to be valid JSON (it parsed): the scan only follows strings and
 * brackets. Undefined when the top level is not an object, or the key is missing or not an array.
 * @example
 * topLevelArrayElements('{"a":[1,{"b":2}]}', 'a') // [[6, 7], [8, 15]]
 */
export function topLevelArrayElements(text: string, key: string): Array<[number, number]> | undefined {
  const quotedKey = JSON.stringify(key);
  let found: Array<[number, number]> | undefined;
  let depth = 0;
  let position = 0;
  const length = text.length;
  /** Whether the next string at depth 1 is a key (after `{` or `,`) rather than a value. */
  let expectKey = false;
  let keyMatched = false;
  let elements: Array<[number, number]> | undefined;
  let elementStart = -1;
  while (position < length) {
    const code = text.charCodeAt(position);
    if (depth === 2 && elements !== undefined && (code === OPEN_BRACE || code === OPEN_BRACKET)) {
      // An element that is an object or array: jump over it whole.
      if (elementStart < 0) elementStart = position;
      position = endOfNested(text, position);
      if (position < 0) return undefined;
      continue;
    }
    if (code === QUOTE) {
      const end = endOfString(text, position);
      if (end < 0) return undefined;
      if (depth === 1 && expectKey) {
        // A key spelled with escapes might be `key` too: not sure which occurrence wins, so no answer.
        if (text.lastIndexOf('\\', end) > position) return undefined;
        keyMatched = end - position === quotedKey.length && text.startsWith(quotedKey, position);
        expectKey = false;
      } else if (depth === 1 && keyMatched) {
        // The key's value is a string: not an array.
        keyMatched = false;
        found = undefined;
      } else if (depth === 2 && elements !== undefined && elementStart < 0) {
        elementStart = position;
      }
      position = end;
      continue;
    }
    if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      if (depth === 0 && code !== OPEN_BRACE) return undefined;
      if (depth === 1 && keyMatched) {
        keyMatched = false;
        elements = code === OPEN_BRACKET ? [] : undefined;
        if (elements === undefined) found = undefined; // an object: not an array
        elementStart = -1;
      } else if (depth === 2 && elements !== undefined && elementStart < 0) {
        elementStart = position;
      }
      depth += 1;
      if (depth === 1) expectKey = true;
      position += 1;
      continue;
    }
    if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth -= 1;
      if (depth === 1 && elements !== undefined) {
        // The end of the array: close its last element (none for `[]`).
        if (elementStart >= 0) elements.push([elementStart, trimmedEnd(text, position)]);
        found = elements;
        elements = undefined;
        elementStart = -1;
      }
      position += 1;
      continue;
    }
    if (code === COMMA) {
      if (depth === 1) expectKey = true;
      else if (depth === 2 && elements !== undefined && elementStart >= 0) {
        elements.push([elementStart, trimmedEnd(text, position)]);
        elementStart = -1;
      }
      position += 1;
      continue;
    }
    if (code === COLON) {
      position += 1;
      continue;
    }
    if (depth === 1 && keyMatched && code > 0x20) {
      // The key's value is a scalar (number, true, false, null): not an array.
      keyMatched = false;
      found = undefined;
    } else if (depth === 2 && elements !== undefined && elementStart < 0 && code > 0x20) {
      elementStart = position;
    }
    position += 1;
  }
  return depth === 0 ? found : undefined;
}

/** `end` moved back over JSON whitespace. */
function trimmedEnd(text: string, end: number): number {
  let position = end;
  for (;;) {
    const code = text.charCodeAt(position - 1);
    if (code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09) position -= 1;
    else return position;
  }
}
