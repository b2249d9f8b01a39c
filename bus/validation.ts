import { createRequire } from 'node:module';
import type FastestValidator from 'fastest-validator';
import type { ValidationError, ValidationSchema } from 'fastest-validator';
import { PierError } from './errors.js';

/**
 * Short messages, without the field name: every error is shown as `<field path>: <message>`
 * (`permission.sysData[1].ops: must be a non-empty array`), so the path is written once.
 */
const messages = {
  required: 'is required',
  string: 'must be a string',
  stringEmpty: 'must not be empty',
  stringMin: 'must be at least {expected} characters long',
  stringMax: 'must be at most {expected} characters long',
  stringPattern: 'must match {expected}',
  stringEnum: 'must be one of {expected}',
  number: 'must be a number',
  numberMin: 'must be at least {expected}',
  numberMax: 'must be at most {expected}',
  numberInteger: 'must be an integer',
  numberPositive: 'must be a positive number',
  array: 'must be an array',
  arrayEmpty: 'must be a non-empty array',
  arrayMin: 'must contain at least {expected} items',
  arrayMax: 'must contain at most {expected} items',
  arrayUnique: 'must not contain duplicates ({actual})',
  boolean: 'must be a boolean',
  object: 'must be an object',
  objectStrict: 'has unknown keys: {actual}',
  enumValue: 'must be one of {expected}',
  equalValue: 'must be {expected}',
  forbidden: 'is not allowed',
  any: 'is required',
};

// The package is CommonJS with `module.exports = Validator`; its typings describe an ES default
// export, which NodeNext resolution reads as a namespace. require() gets the class as it is.
const Validator = createRequire(import.meta.url)('fastest-validator') as typeof FastestValidator.default;
const validator = new Validator({ useNewCustomCheckerFunction: true, messages });

export interface FieldError {
  field: string;
  message: string;
}

export type Checker = (value: unknown) => readonly FieldError[];

/** What every valid value gets: one shared empty list (a check runs on every bus message). */
const VALID: readonly FieldError[] = Object.freeze([]);

function formatExpected(err: ValidationError): string {
  const e = err.expected;
  if (Array.isArray(e)) return e.join(', ');
  if (e instanceof RegExp) return String(e);
  return String(e);
}

/** Compiles a schema once; the checker returns field errors with their full paths (empty = valid). */
export function compile(schema: ValidationSchema, prefix = ''): Checker {
  const check = validator.compile(schema);
  return (value: unknown) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return [{ field: prefix.replace(/\.$/, '') || 'body', message: 'must be an object' }];
    }
    const result = check(value as object);
    if (result === true) return VALID;
    if (!Array.isArray(result)) throw new TypeError('async schemas are not supported');
    return result.map((err) => ({
      field: `${prefix}${err.field ?? ''}`.replace(/\.$/, '') || 'body',
      message: String(err.message ?? err.type).replace('{expected}', formatExpected(err)),
    }));
  };
}

export function describe(errors: readonly FieldError[]): string {
  const first = `${errors[0].field}: ${errors[0].message}`;
  return errors.length > 1 ? `${first} (and ${errors.length - 1} more)` : first;
}

/**
 * Every bad field in one line, `field: rule; field: rule`, the first `max` of them: for documents a
 * person wrote (a manifest), fixed in one go rather than one mistake per try.
 */
export function describeAll(errors: readonly FieldError[], max = 10): string {
  const shown = errors.slice(0, max).map((e) => `${e.field}: ${e.message}`).join('; ');
  return errors.length > max ? `${shown} (and ${errors.length - max} more)` : shown;
}

/** Throws a 400 naming the first bad field; all of them are in `data.errors`. */
export function assertValid(checker: Checker, value: unknown): void {
  throwIfInvalid(checker(value));
}

/** Throws a 400 for `errors` of a check already made (none: nothing). */
export function throwIfInvalid(errors: readonly FieldError[]): void {
  if (errors.length > 0) throw new PierError('BAD_REQUEST', describe(errors), { data: { errors } });
}
