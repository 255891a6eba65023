/** Small checks of JSON request values that both translations share. */
import { describeValue } from '../../internal/describe-value.js';
import { malformed } from './translation-error.js';

/** True for a JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `value` when it is a JSON object, else a malformed-request error naming `param`. */
export function objectAt(value: unknown, param: string): Record<string, unknown> {
  if (!isObject(value)) throw malformed(param, 'an object', describeValue(value));
  return value;
}

/** `value` when it is a string, else a malformed-request error naming `param`. */
export function stringAt(value: unknown, param: string): string {
  if (typeof value !== 'string') throw malformed(param, 'a string', describeValue(value));
  return value;
}

/** `value` when it is an array, else a malformed-request error naming `param`. */
export function arrayAt(value: unknown, param: string): unknown[] {
  if (!Array.isArray(value)) throw malformed(param, 'an array', describeValue(value));
  return value;
}

/** `value` when it is a finite number, undefined when missing or null, else an error naming `param`. */
export function optionalNumberAt(value: unknown, param: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw malformed(param, 'a number', describeValue(value));
  return value;
}

/** `value` when it is a boolean, undefined when missing or null, else an error naming `param`. */
export function optionalBooleanAt(value: unknown, param: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw malformed(param, 'a boolean', describeValue(value));
  return value;
}

/** A random id with `prefix` (`resp_`, `msg_`, `fc_`, ...), as the APIs write theirs. */
export function randomId(prefix: string): string {
  return `${prefix}${crypto.randomUUID().replaceAll('-', '')}`;
}
