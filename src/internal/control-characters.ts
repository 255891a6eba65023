/**
 * Control characters in text that reaches a terminal or a log line: ESC starts escape sequences
 * that can rewrite what an operator sees, BEL rings, backspace and carriage return overwrite.
 * Text from the service (names, messages, paths) is printed through {@link escapeControl}.
 */

/**
 * C0 controls (U+0000-U+001F), DEL, C1 controls (U+0080-U+009F) and the bidirectional overrides
 * and isolates (U+202A-U+202E, U+2066-U+2069), which reorder what a terminal shows: the body of a
 * regular expression character class written with `\uXXXX` escapes only, which ECMAScript, Python
 * and Rust regular expressions read alike (the service's OpenAPI document carries it in patterns).
 */
export const CONTROL_CHARACTER_RANGES = '\\u0000-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069';
const CONTROL = new RegExp(`[${CONTROL_CHARACTER_RANGES}]`, 'g');

/** Whether `text` holds a control character (see {@link escapeControl}; tab and newlines included). */
export function hasControlCharacter(text: string): boolean {
  CONTROL.lastIndex = 0;
  return CONTROL.test(text);
}

/**
 * Text with every control character written as a visible escape (`\x1b`, `\u202e`), so that
 * printing it cannot move the cursor, change colours or hide text. With `keepLines`, tab and line
 * feed stay (multi-line text such as a model's answer).
 * @example
 * escapeControl('a\u001b[2Jb'); // 'a\\x1b[2Jb'
 */
export function escapeControl(text: string, options: { keepLines?: boolean | undefined } = {}): string {
  return text.replace(CONTROL, (character) => {
    if (options.keepLines === true && (character === '\n' || character === '\t')) return character;
    const code = character.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
