/**
 * `policyloop report <model> -o report.html`: one self-contained HTML file with the reward and
 * loss curves and a few sample trajectories per split, to attach to a pull request.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { TrainingClient } from '../../client/index.js';
import type { Trajectory } from '../../schema/index.js';
import { type CommonOptions, out, outJson, progress, progressDone, resolveModel } from '../context.js';
import { reportHtml } from '../report-html.js';
import type { ReportData } from '../report-html.js';
import { loadHistory } from './history.js';
import { positiveInteger } from './resources.js';

/** Options of `report`. */
export interface ReportOptions extends CommonOptions {
  output: string;
  dataDir?: string | undefined;
  samples?: string | undefined;
}

/** `report <model> -o FILE`. */
export async function report(client: TrainingClient, reference: string, options: ReportOptions): Promise<number> {
  const perSplit = options.samples === undefined ? 4 : positiveInteger('--samples', options.samples);
  progress('reading the history');
  const { rows, source } = await loadHistory(client, reference, { dataDir: options.dataDir });
  const fromService = !source.endsWith('.jsonl');
  const facts = [`history from ${source}`, `${rows.length} step(s) recorded`];
  let title = reference;
  const samples: { split: string; step: number; trajectories: Trajectory[] }[] = [];
  if (fromService) {
    const model = await resolveModel(client, reference);
    title = `${model.entity}/${model.project}/${model.name}`;
    facts.unshift(`model ${model.id}`, `base model ${model.base_model}, latest step ${model.latest_step}`);
    // The newest step of each split that has trajectories: its trajectories, best reward first.
    const splits = [...new Set(rows.flatMap((row) => Object.keys(row).filter((name) => name.endsWith('/reward'))))]
      .map((name) => name.split('/')[0] as string)
      .filter((split) => split !== 'sft');
    for (const split of splits) {
      progress(`reading ${split} trajectories`);
      const steps = rows.filter((row) => typeof row[`${split}/reward`] === 'number').map((row) => row.training_step);
      for (const step of steps.reverse()) {
        // Only the best `perSplit` are kept while the pages stream in: a step may hold gigabytes.
        let best: Trajectory[] = [];
        for await (const logged of client.local.trajectoryGroups.list(model.id, { step, split, limit: 100 }))
          best = bestByReward(best, logged.group.trajectories, perSplit);
        if (best.length === 0) continue;
        samples.push({ split, step, trajectories: best });
        break;
      }
    }
  }
  const data: ReportData = {
    title,
    facts,
    history: rows,
    samples,
    samplesNote: fromService
      ? 'No trajectory groups were logged.'
      : 'Read from history.jsonl: trajectories are kept by the local service only.',
    generatedAt: new Date().toISOString(),
  };
  const file = path.resolve(options.output);
  await writeFile(file, reportHtml(data), 'utf8');
  progressDone();
  if (options.json)
    outJson({
      path: file,
      steps: rows.length,
      samples: samples.map(({ split, step, trajectories }) => ({ split, step, trajectories: trajectories.length })),
    });
  else
    out(
      `wrote ${file} (${rows.length} step(s), samples from ${samples.map((sample) => `${sample.split} step ${sample.step}`).join(', ') || 'no split'})`,
    );
  return 0;
}

/** The `count` trajectories of highest reward among `kept` (sorted, best first) and `more`; ties keep the earlier. */
function bestByReward(kept: readonly Trajectory[], more: readonly Trajectory[], count: number): Trajectory[] {
  const merged = [...kept];
  for (const trajectory of more) merged.push(trajectory);
  merged.sort((a, b) => b.reward - a.reward);
  return merged.slice(0, count);
}
