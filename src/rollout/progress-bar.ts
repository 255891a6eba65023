/**
 * A one-line progress bar for a terminal, driven by a gather's `progress` events. Only used when
 * the caller asks for it (`progress: true`) and stderr is a terminal; library use stays silent.
 */
import type { GatherEmitter, GatherProgressEvent } from './gather-events.js';

/** Where the bar is drawn: anything with `write` (process.stderr). */
export interface ProgressStream {
  /** Writes text as it is (the bar redraws with `\r`). */
  write(text: string): unknown;
}

const WIDTH = 24;

/** The text of the bar for one progress event, e.g. `gather [######------]  12/32  reward 0.531  failed 1`. */
export function formatProgress(event: GatherProgressEvent): string {
  const fraction = event.total === 0 ? 1 : event.done / event.total;
  const filled = Math.round(fraction * WIDTH);
  const bar = '#'.repeat(filled) + '-'.repeat(WIDTH - filled);
  const reward = Number.isNaN(event.rewardMean) ? '-' : event.rewardMean.toFixed(3);
  const failed = event.failed > 0 ? `  failed ${event.failed}` : '';
  return `gather [${bar}] ${String(event.done).padStart(String(event.total).length)}/${event.total}  reward ${reward}${failed}`;
}

/**
 * Draws the bar on `stream` at every `progress` event (redrawing the same line) and returns a
 * function that ends the line and stops listening.
 */
export function attachProgressBar<S>(events: GatherEmitter<S>, stream: ProgressStream): () => void {
  let drawn = false;
  const onProgress = (event: GatherProgressEvent): void => {
    stream.write(`\r${formatProgress(event)}`);
    drawn = true;
  };
  events.on('progress', onProgress);
  return () => {
    events.off('progress', onProgress);
    if (drawn) stream.write('\n');
  };
}
