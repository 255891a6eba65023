/**
 * The HTML of `policyloop report`: one self-contained file (no script, no external asset) with
 * the reward and loss curves as inline SVG and a few sample trajectories per split.
 */
import type { Trajectory } from '../schema/index.js';
import { messageOf, runItems } from '../schema/index.js';
import type { HistoryRow } from '../training/history.js';
import { maxOf, minOf } from '../internal/arrays.js';

/** What a report shows. */
export interface ReportData {
  /** `entity/project/name` or `project/name`. */
  readonly title: string;
  /** Lines of facts under the title (base model, latest step, where the data came from). */
  readonly facts: readonly string[];
  /** The history, one row per step. */
  readonly history: readonly HistoryRow[];
  /** Sample trajectories per split, with the step they were logged at. */
  readonly samples: readonly { split: string; step: number; trajectories: readonly Trajectory[] }[];
  /** Said in place of samples when there are none (e.g. read from history.jsonl). */
  readonly samplesNote?: string | undefined;
  /** When the report was made (ISO 8601). */
  readonly generatedAt: string;
}

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

/** One chart's series: a metric's value at each step that has it. */
interface Series {
  readonly name: string;
  readonly points: readonly (readonly [number, number])[];
}

/** The series of every metric in `history` whose name `wanted` accepts, sorted by name. */
function seriesWhere(history: readonly HistoryRow[], wanted: (name: string) => boolean): Series[] {
  const names = new Set<string>();
  for (const row of history) for (const name of Object.keys(row)) if (wanted(name)) names.add(name);
  return [...names].sort().map((name) => ({
    name,
    points: history
      .filter((row) => typeof row[name] === 'number' && Number.isFinite(row[name]))
      .map((row) => [row.training_step, row[name] as number] as const),
  }));
}

/** The series of every metric in `history` whose name ends with one of `suffixes` (`val/reward`). */
export function seriesOf(history: readonly HistoryRow[], suffixes: readonly string[]): Series[] {
  return seriesWhere(
    history,
    (name) => suffixes.some((suffix) => name.endsWith(`/${suffix}`)) && name.split('/').length === 2,
  );
}

/** The series of every metric in `history` of one of the step families (`time/`, `rollouts/`...). */
export function familySeries(history: readonly HistoryRow[], families: readonly string[]): Series[] {
  return seriesWhere(history, (name) => families.some((family) => name.startsWith(`${family}/`)));
}

/** A short number for an axis label. */
function label(value: number): string {
  return Number(value.toPrecision(3)).toString();
}

/**
 * A line chart as inline SVG: one polyline per series (its values in `data-values` as
 * `step:value` pairs), dots with a hover title, min/max labels on both axes, a legend.
 */
export function lineChart(title: string, series: readonly Series[]): string {
  const width = 560;
  const height = 260;
  const left = 56;
  const right = 16;
  const top = 28;
  const bottom = 36;
  const points = series.flatMap((one) => one.points);
  if (points.length === 0)
    return `<figure class="chart"><figcaption>${escapeHtml(title)}</figcaption><p class="empty">No values recorded.</p></figure>`;
  const steps = points.map(([step]) => step);
  const values = points.map(([, value]) => value);
  let [minStep, maxStep] = [minOf(steps), maxOf(steps)];
  let [minValue, maxValue] = [minOf(values), maxOf(values)];
  if (minStep === maxStep) [minStep, maxStep] = [minStep - 1, maxStep + 1];
  if (minValue === maxValue) [minValue, maxValue] = [minValue - 0.5, maxValue + 0.5];
  const round = (n: number) => Math.round(n * 10) / 10;
  const x = (step: number) => left + ((step - minStep) / (maxStep - minStep)) * (width - left - right);
  const y = (value: number) => top + (1 - (value - minValue) / (maxValue - minValue)) * (height - top - bottom);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeHtml(title)}">`,
    `<rect x="${left}" y="${top}" width="${width - left - right}" height="${height - top - bottom}" fill="#fafafa" stroke="#d4d4d8"/>`,
    // Light grid lines at a quarter, half and three quarters of the value range (half labelled).
    ...[0.25, 0.5, 0.75].map(
      (fraction) =>
        `<line x1="${left}" x2="${width - right}" y1="${round(y(minValue + fraction * (maxValue - minValue)))}" y2="${round(y(minValue + fraction * (maxValue - minValue)))}" stroke="#e4e4e7"/>`,
    ),
    `<text x="${left - 6}" y="${round(y((minValue + maxValue) / 2)) + 4}" text-anchor="end" class="tick">${label((minValue + maxValue) / 2)}</text>`,
    `<text x="${left - 6}" y="${top + 4}" text-anchor="end" class="tick">${label(maxValue)}</text>`,
    `<text x="${left - 6}" y="${height - bottom}" text-anchor="end" class="tick">${label(minValue)}</text>`,
    `<text x="${left}" y="${height - bottom + 16}" text-anchor="middle" class="tick">${label(minStep)}</text>`,
    `<text x="${width - right}" y="${height - bottom + 16}" text-anchor="middle" class="tick">${label(maxStep)}</text>`,
    `<text x="${(left + width - right) / 2}" y="${height - 6}" text-anchor="middle" class="tick">step</text>`,
  ];
  series.forEach((one, index) => {
    const color = COLORS[index % COLORS.length] as string;
    const coordinates = one.points.map(([step, value]) => `${round(x(step))},${round(y(value))}`).join(' ');
    const data = one.points.map(([step, value]) => `${step}:${value}`).join(' ');
    parts.push(
      `<polyline data-series="${escapeHtml(one.name)}" data-values="${data}" points="${coordinates}" fill="none" stroke="${color}" stroke-width="2"/>`,
    );
    for (const [step, value] of one.points)
      parts.push(
        `<circle cx="${round(x(step))}" cy="${round(y(value))}" r="3" fill="${color}"><title>${escapeHtml(one.name)} at step ${step}: ${value}</title></circle>`,
      );
    parts.push(
      `<rect x="${left + 8 + index * 130}" y="8" width="10" height="10" fill="${color}"/><text x="${left + 22 + index * 130}" y="17" class="legend">${escapeHtml(one.name)}</text>`,
    );
  });
  parts.push('</svg>');
  return `<figure class="chart"><figcaption>${escapeHtml(title)}</figcaption>${parts.join('')}</figure>`;
}

/** Longest text of one message (or its tool calls) a report shows; the rest is summarized in a note. */
export const MAX_REPORT_MESSAGE_CHARACTERS = 20_000;

/** `text` cut after {@link MAX_REPORT_MESSAGE_CHARACTERS}, with how many characters were left out. */
function clip(text: string): string {
  if (text.length <= MAX_REPORT_MESSAGE_CHARACTERS) return text;
  return `${text.slice(0, MAX_REPORT_MESSAGE_CHARACTERS)} … (${text.length - MAX_REPORT_MESSAGE_CHARACTERS} more characters not shown)`;
}

function content(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value))
    return value
      .map((part) =>
        typeof part === 'object' && part !== null && 'text' in part ? String(part.text) : JSON.stringify(part),
      )
      .join('');
  return value === null || value === undefined ? '' : JSON.stringify(value);
}

/**
 * A tool call as a reader writes it: `update_seat(seat: "12A")` for JSON object arguments,
 * `name(raw)` otherwise.
 * @example
 * toolCallText({ type: 'function', function: { name: 'lookup', arguments: '{"city":"Oslo"}' } }); // 'lookup(city: "Oslo")'
 */
export function toolCallText(call: unknown): string {
  const record = (call ?? {}) as {
    function?: { name?: unknown; arguments?: unknown } | undefined;
    custom?: { name?: unknown; input?: unknown } | undefined;
  };
  const name = String(record.function?.name ?? record.custom?.name ?? '?');
  const raw = String(record.function?.arguments ?? record.custom?.input ?? '');
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return `${name}(${raw})`;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return `${name}(${raw})`;
  const args = Object.entries(parsed as Record<string, unknown>).map(
    ([key, value]) => `${key}: ${JSON.stringify(value)}`,
  );
  return `${name}(${args.join(', ')})`;
}

/** System prompts that appear more than once among `trajectories` (any conversation), numbered from 1. */
function repeatedSystemPrompts(trajectories: readonly Trajectory[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const trajectory of trajectories)
    for (const { item } of runItems(trajectory)) {
      const message = messageOf(item) as { role: string; content?: unknown };
      if (message.role !== 'system' && message.role !== 'developer') continue;
      const text = content(message.content);
      counts.set(text, (counts.get(text) ?? 0) + 1);
    }
  const shared = new Map<string, number>();
  for (const [text, count] of counts) if (count > 1) shared.set(text, shared.size + 1);
  return shared;
}

function trajectoryHtml(trajectory: Trajectory, shared: ReadonlyMap<string, number>, step: number): string {
  // The whole run in the order it happened; a heading wherever the conversation changes.
  let current = 0;
  const messages = runItems(trajectory).map(({ item, history }) => {
    const heading =
      history === current
        ? ''
        : `<div class="conversation">${history === 0 ? 'main conversation' : `sub-agent conversation ${history}`}</div>`;
    current = history;
    const message = messageOf(item) as { role: string; content?: unknown; tool_calls?: unknown };
    const text = content(message.content);
    const prompt = message.role === 'system' || message.role === 'developer' ? shared.get(text) : undefined;
    if (prompt !== undefined)
      return `${heading}<div class="message ${escapeHtml(message.role)}"><span class="role">${escapeHtml(message.role)} · prompt ${prompt} (above)</span></div>`;
    const calls = Array.isArray(message.tool_calls)
      ? message.tool_calls.map((call) => `<pre class="tool">→ ${escapeHtml(clip(toolCallText(call)))}</pre>`).join('')
      : '';
    const body = text === '' && calls !== '' ? '' : `<pre>${escapeHtml(clip(text))}</pre>`;
    return `${heading}<div class="message ${escapeHtml(message.role)}"><span class="role">${escapeHtml(message.role)}</span>${body}${calls}</div>`;
  });
  const metrics = Object.entries(trajectory.metrics ?? {})
    .map(([name, value]) => `${escapeHtml(name)}=${escapeHtml(String(value))}`)
    .join(' ');
  const sampled =
    typeof trajectory.initial_policy_version === 'number' && trajectory.initial_policy_version !== step
      ? ` · sampled at step ${trajectory.initial_policy_version}`
      : '';
  return `<article class="trajectory"><header>reward <b>${escapeHtml(String(trajectory.reward))}</b>${metrics === '' ? '' : ` · ${metrics}`}${sampled}</header>${messages.join('')}</article>`;
}

/** A split's samples: the system prompts they share shown once, then each trajectory. */
function sampleHtml(sample: ReportData['samples'][number]): string {
  const shared = repeatedSystemPrompts(sample.trajectories);
  const prompts = [...shared]
    .map(
      ([text, number]) =>
        `<div class="message system shared"><span class="role">system prompt ${number}</span><pre>${escapeHtml(text)}</pre></div>`,
    )
    .join('');
  const cards = sample.trajectories.map((trajectory) => trajectoryHtml(trajectory, shared, sample.step)).join('');
  return `<section><h3>${escapeHtml(sample.split)} · step ${sample.step}</h3>${prompts}<div class="trajectories">${cards}</div></section>`;
}

/**
 * The whole report as one HTML document.
 * @example
 * await writeFile('report.html', reportHtml({ title: 'demo/agent', facts: [], history, samples: [], generatedAt }));
 */
export function reportHtml(data: ReportData): string {
  const rewards = lineChart('Reward', seriesOf(data.history, ['reward']));
  const losses = lineChart('Loss', seriesOf(data.history, ['loss']));
  // Where each step's time went, and what its rollouts and groups lost (the step's own metrics).
  const timeSeries = familySeries(data.history, ['time', 'idle']);
  const lossSeries = familySeries(data.history, ['rollouts', 'groups']);
  const times = timeSeries.length === 0 ? '' : lineChart('Seconds per step', timeSeries);
  const failures = lossSeries.some((series) => series.points.some(([, value]) => value > 0))
    ? lineChart('Failed rollouts and dropped groups', lossSeries)
    : '';
  const samples =
    data.samples.length === 0
      ? `<p class="empty">${escapeHtml(data.samplesNote ?? 'No trajectory groups were logged.')}</p>`
      : data.samples.map(sampleHtml).join('');
  const latest = data.history.at(-1);
  const summary =
    latest === undefined
      ? ''
      : `<p>Latest step ${latest.training_step}: ${Object.entries(latest)
          .filter(
            ([name, value]) =>
              (/^[^/]+\/(reward|loss)$/.test(name) || name === 'time/step' || name === 'rollouts/failed') &&
              typeof value === 'number',
          )
          .map(([name, value]) => `${escapeHtml(name)} <b>${label(value as number)}</b>`)
          .join(', ')}</p>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(data.title)} · policyloop report</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1160px; padding: 0 16px; color: #18181b; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; } h3 { font-size: 15px; margin: 16px 0 6px; }
.facts { color: #52525b; margin: 0; padding: 0; list-style: none; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
.chart { margin: 0; } figcaption { font-weight: 600; margin-bottom: 4px; }
.tick, .legend { font: 11px system-ui, sans-serif; fill: #3f3f46; }
.trajectories { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 12px; }
.trajectory { border: 1px solid #d4d4d8; border-radius: 6px; padding: 8px; background: #fff; }
.trajectory header { margin-bottom: 6px; color: #3f3f46; }
.message { margin: 4px 0; } .role { font-size: 11px; text-transform: uppercase; color: #71717a; }
.message pre { margin: 2px 0; white-space: pre-wrap; word-break: break-word; font: 13px/1.4 ui-monospace, monospace; background: #f4f4f5; padding: 4px 6px; border-radius: 4px; }
.message.assistant pre { background: #eff6ff; } .tool { background: #fefce8 !important; }
.conversation { margin: 8px 0 2px; font-size: 12px; font-weight: 600; color: #7c3aed; border-top: 1px dashed #d4d4d8; padding-top: 4px; }
.shared { max-width: 720px; }
.empty { color: #71717a; font-style: italic; }
footer { margin-top: 32px; color: #a1a1aa; font-size: 12px; }
</style>
</head>
<body>
<h1>${escapeHtml(data.title)}</h1>
<ul class="facts">${data.facts.map((fact) => `<li>${escapeHtml(fact)}</li>`).join('')}</ul>
${summary}
<h2>Curves</h2>
<div class="charts">${rewards}${losses}${times}${failures}</div>
<h2>Sample trajectories</h2>
${samples}
<footer>Made by policyloop report at ${escapeHtml(data.generatedAt)}.</footer>
</body>
</html>
`;
}
