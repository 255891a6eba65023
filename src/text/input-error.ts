/** The error a model's text layer and an engine throw for a request they cannot serve. */

/**
 * A request that cannot be served because of its content: a prompt longer than the context, a
 * part the model cannot read, a chat template that refuses the messages. The local service
 * answers it with a 4xx naming `loc`, never a 500.
 */
export class EngineInputError extends Error {
  override readonly name = 'EngineInputError';
  constructor(
    message: string,
    /** Where in the request the problem is, FastAPI style (e.g. `['body', 'messages']`). */
    readonly loc: readonly (string | number)[] = ['body'],
    /**
     * The 4xx to answer with: 422 (a validation error naming `loc`), or the status a remote
     * engine's server refused the request with (a Tinker server's 400), kept as it came.
     */
    readonly status: number = 422,
  ) {
    super(message);
  }
}
