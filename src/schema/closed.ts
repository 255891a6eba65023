/**
 * Types of loose wire objects without their index signature. A `z.looseObject` keeps unknown keys
 * at run time, and its inferred type says so with `[key: string]: unknown`; but a TypeScript
 * interface (every type of the openai SDK) is never assignable to a type with an index signature.
 * `Closed` keeps the known keys (recursively, through arrays and unions) and drops the signature,
 * so that `OpenAI.ChatCompletionMessageParam[]` fits where a wire message is expected. A plain
 * record (`Record<string, unknown>`: an index signature and no known key) is kept as it is.
 */

/** The known (non-index) keys of `T`. */
type KnownKeys<T> = keyof {
  [K in keyof T as string extends K ? never : number extends K ? never : symbol extends K ? never : K]: 0;
};

/**
 * `T` with the index signatures of its loose objects removed, recursively.
 * @example
 * type Message = Closed<z.infer<typeof ChatCompletionMessageParam>>; // OpenAI's message params fit
 */
export type Closed<T> = T extends readonly (infer Item)[]
  ? T extends unknown[]
    ? Closed<Item>[]
    : readonly Closed<Item>[]
  : T extends object
    ? [KnownKeys<T>] extends [never]
      ? T
      : { [K in keyof T as string extends K ? never : number extends K ? never : K]: Closed<T[K]> }
    : T;
