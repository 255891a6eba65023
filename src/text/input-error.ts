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
  ) {
    super(message);
  }
}
