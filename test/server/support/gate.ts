/** A gate that holds stand-in training jobs RUNNING until a test opens it. */
export interface Gate {
  /** Resolves once the gate is open. */
  readonly wait: () => Promise<void>;
  readonly open: () => void;
}

/** Creates a closed gate. */
export function createGate(): Gate {
  let open = (): void => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait: () => opened, open: () => open() };
}
