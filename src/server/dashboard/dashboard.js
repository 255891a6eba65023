// The policyloop dashboard: plain browser JavaScript, no build step. It reads the local service's
// routes (`/v1/local/...` and the contract's checkpoint and event lists) with the key the user gave
// (login form or `#key=...` fragment, kept in sessionStorage) and polls every few seconds.
(() => {
  const KEY_STORAGE = 'policyloop.apiKey';
  const POLL_MS = 3000;
  const GROUPS_PER_PAGE = 10;
  // Longest text and token run shown of one message: the rest is summarized in a note, so that a
  // logged message of megabytes does not freeze the page.
  const MAX_SHOWN_CHARACTERS = 20_000;
  const MAX_SHOWN_TOKENS = 2_000;
  const SPLIT_COLORS = { train: '#2458c6', val: '#d1570f' };
  const OTHER_COLORS = ['#17784a', '#8f3fb0', '#a07800', '#0f7f99', '#b3261e'];

  const $ = (id) => document.getElementById(id);

  /** `text`, cut after MAX_SHOWN_CHARACTERS with a note of how much was left out. */
  function clip(text) {
    if (typeof text !== 'string' || text.length <= MAX_SHOWN_CHARACTERS) return text;
    return `${text.slice(0, MAX_SHOWN_CHARACTERS)} … (${text.length - MAX_SHOWN_CHARACTERS} more characters not shown)`;
  }

  /** Replaces the children of `element` (a loop: a spread of thousands of children overflows the stack). */
  function setChildren(element, children) {
    element.replaceChildren();
    for (const child of children) element.append(child);
  }

  /** The largest number of `values` (a loop, unlike `Math.max(...values)`, for any count). */
  function largest(values) {
    let result = Number.NEGATIVE_INFINITY;
    for (const value of values) if (value > result) result = value;
    return result;
  }

  /** Creates an element: `h('p', { class: 'note' }, 'text', child)`. Text is never parsed as HTML. */
  function h(tag, attributes, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes ?? {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
      else element.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      element.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return element;
  }

  const state = {
    key: null,
    models: [],
    modelId: null,
    metrics: [],
    metric: 'reward',
    jobs: [],
    jobId: null,
    split: null,
    step: null,
    followLatestStep: true,
    sort: 'desc',
    groups: [],
    groupsCursor: null,
    groupsKey: '',
    groupsStamp: '',
    groupsClipped: false,
    chart: null,
    chartShape: '',
    refreshing: false,
  };

  // ---- the key ----

  function takeKeyFromFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    const key = params.get('key');
    if (key) {
      sessionStorage.setItem(KEY_STORAGE, key);
      params.delete('key');
      // The key leaves the address bar (and the history) at once.
      const rest = params.toString();
      history.replaceState(null, '', location.pathname + location.search + (rest ? `#${rest}` : ''));
    }
    const model = params.get('model');
    if (model) state.modelId = model;
    state.key = sessionStorage.getItem(KEY_STORAGE);
  }

  function showLogin(message) {
    state.key = null;
    sessionStorage.removeItem(KEY_STORAGE);
    $('app-view').hidden = true;
    $('logout').hidden = true;
    $('login-view').hidden = false;
    $('login-error').textContent = message ?? '';
    setStatus('');
    $('key-input').focus();
  }

  function showApp() {
    $('login-view').hidden = true;
    $('app-view').hidden = false;
    $('logout').hidden = false;
  }

  class Unauthorized extends Error {}

  // ---- requests ----

  async function api(path, query) {
    const url = new URL(path, location.origin);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    }
    const response = await fetch(url, {
      headers: { Authorization: `Bearer ${state.key}`, Accept: 'application/json' },
      cache: 'no-store',
    });
    if (response.status === 401) throw new Unauthorized('The service refused this key.');
    const body = await response.json().catch(() => undefined);
    if (!response.ok) {
      const detail = body?.detail;
      throw new Error(`${response.status}: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`);
    }
    return body;
  }

  async function listAll(path, query) {
    const items = [];
    let after;
    for (;;) {
      const page = await api(path, { ...query, limit: 100, after });
      for (const item of page.data) items.push(item);
      if (!page.has_more || !page.last_id || page.last_id === after) return items;
      after = page.last_id;
    }
  }

  // ---- formatting ----

  function formatNumber(value) {
    if (typeof value !== 'number' || !Number.isFinite(value)) return String(value);
    if (Number.isInteger(value)) return String(value);
    const magnitude = Math.abs(value);
    if (magnitude !== 0 && (magnitude < 0.001 || magnitude >= 1e6)) return value.toExponential(2);
    return value.toFixed(magnitude < 1 ? 3 : 2);
  }

  function formatTime(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return '';
    const seconds = Math.round((Date.now() - date.getTime()) / 1000);
    if (seconds < 60) return `${Math.max(0, seconds)}s ago`;
    if (seconds < 3600) return `${Math.round(seconds / 60)}m ago`;
    if (seconds < 86400) return `${Math.round(seconds / 3600)}h ago`;
    return date.toLocaleDateString();
  }

  function setStatus(text, offline) {
    const status = $('status');
    status.textContent = text;
    status.classList.toggle('offline', Boolean(offline));
  }

  function rewardColors(reward) {
    // Rewards are often in [0, 1]: tint from red (0) to green (1); clamp outside.
    const t = Math.max(0, Math.min(1, reward));
    return { background: `hsl(${Math.round(t * 130)}, 60%, 90%)`, color: `hsl(${Math.round(t * 130)}, 70%, 24%)` };
  }

  // ---- models ----

  function renderModels() {
    const list = $('model-list');
    setChildren(
      list,
      state.models.map((model) =>
        h(
          'li',
          null,
          h(
            'button',
            {
              type: 'button',
              'aria-current': model.id === state.modelId ? 'true' : 'false',
              onclick: () => selectModel(model.id),
            },
            h('span', { class: 'name' }, `${model.project}/${model.name}`),
            h('span', { class: 'meta' }, `step ${model.latest_step} · ${model.base_model}`),
          ),
        ),
      ),
    );
    $('empty').hidden = state.models.length > 0;
    $('model-detail').hidden = state.models.length === 0;
  }

  function selectModel(id) {
    if (state.modelId === id) return;
    state.modelId = id;
    state.metrics = [];
    state.jobId = null;
    state.split = null;
    state.step = null;
    state.followLatestStep = true;
    state.groupsKey = '';
    state.chartShape = '';
    history.replaceState(null, '', `${location.pathname}${location.search}#model=${encodeURIComponent(id)}`);
    renderModels();
    refresh();
  }

  function renderModelHeader(model) {
    $('model-title').textContent = `${model.entity}/${model.project}/${model.name}`;
    const fact = (name, value) => h('div', null, h('dt', null, name), h('dd', null, value));
    $('model-facts').replaceChildren(
      fact('base model', model.base_model),
      fact('step', String(model.latest_step)),
      fact('registered', new Date(model.created_at).toLocaleString()),
      fact('id', h('code', null, model.id)),
    );
  }

  // ---- metrics chart ----

  function metricNames() {
    const names = new Set();
    for (const row of state.metrics) for (const name of Object.keys(row.metrics)) names.add(name);
    return [...names].sort((a, b) => (a === 'reward' ? -1 : b === 'reward' ? 1 : a.localeCompare(b)));
  }

  function renderMetricSelect() {
    const select = $('metric-select');
    const names = metricNames();
    if (names.length > 0 && !names.includes(state.metric)) state.metric = names[0];
    const current = [...select.options].map((option) => option.value).join('\n');
    if (current !== names.join('\n')) {
      setChildren(
        select,
        names.map((name) => h('option', { value: name }, name)),
      );
    }
    select.value = state.metric;
  }

  function chartData() {
    const splits = [...new Set(state.metrics.map((row) => row.split))].sort((a, b) =>
      a === 'train' ? -1 : b === 'train' ? 1 : a.localeCompare(b),
    );
    const bySplit = new Map(splits.map((split) => [split, new Map()]));
    for (const row of state.metrics) {
      const value = row.metrics[state.metric];
      if (typeof value === 'number') bySplit.get(row.split).set(row.step, value);
    }
    const shown = splits.filter((split) => bySplit.get(split).size > 0);
    const steps = [...new Set(shown.flatMap((split) => [...bySplit.get(split).keys()]))].sort((a, b) => a - b);
    const series = shown.map((split) => steps.map((step) => bySplit.get(split).get(step) ?? null));
    return { splits: shown, steps, series, bySplit };
  }

  function renderChart() {
    const figure = $('chart');
    const { splits, steps, series, bySplit } = chartData();
    const points = series.reduce((count, values) => count + values.filter((value) => value !== null).length, 0);
    $('chart-heading').textContent = state.metric === 'reward' ? 'Reward' : state.metric;
    figure.dataset.points = String(points);
    figure.dataset.series = splits.join(',');
    const latest = splits.map((split) => {
      const values = bySplit.get(split);
      const last = largest(values.keys());
      return `${split} ${formatNumber(values.get(last))} at step ${last}`;
    });
    const summary = points === 0 ? `No ${state.metric} recorded yet` : `${state.metric}: ${latest.join('; ')}`;
    figure.setAttribute('aria-label', summary);
    $('chart-note').textContent =
      points === 0 ? 'Log or train on trajectory groups to see a curve.' : `Latest ${summary.replace(':', ' —')}.`;
    renderChartTable(splits, steps, series);

    if (typeof uPlot === 'undefined') {
      figure.replaceChildren(h('p', { class: 'note' }, 'Charts need the optional `uplot` package next to policyloop.'));
      return;
    }
    const shape = `${state.metric}|${splits.join(',')}`;
    const data = [steps, ...series];
    const width = Math.max(320, figure.clientWidth);
    if (state.chart !== null && state.chartShape === shape) {
      state.chart.setData(data);
      return;
    }
    state.chart?.destroy();
    figure.replaceChildren();
    state.chartShape = shape;
    let other = 0;
    state.chart = new uPlot(
      {
        width,
        height: 330,
        scales: { x: { time: false } },
        cursor: { drag: { x: false, y: false } },
        axes: [
          {
            label: 'step',
            stroke: '#556070',
            grid: { stroke: '#edf0f3' },
            incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500],
          },
          { label: state.metric, stroke: '#556070', grid: { stroke: '#edf0f3' }, size: 60 },
        ],
        series: [
          { label: 'step' },
          ...splits.map((split) => {
            const color = SPLIT_COLORS[split] ?? OTHER_COLORS[other++ % OTHER_COLORS.length];
            return {
              label: split,
              stroke: color,
              width: 2,
              spanGaps: true,
              points: { show: true, size: 7, fill: color },
              value: (_chart, value) => (value === null || value === undefined ? '–' : formatNumber(value)),
            };
          }),
        ],
      },
      data,
      figure,
    );
  }

  function renderChartTable(splits, steps, series) {
    const rows = steps.map((step, index) =>
      h(
        'tr',
        null,
        h('td', null, String(step)),
        series.map((values) => h('td', null, values[index] === null ? '' : formatNumber(values[index]))),
      ),
    );
    $('chart-table').replaceChildren(
      h(
        'table',
        null,
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            h('th', null, 'step'),
            splits.map((split) => h('th', null, split)),
          ),
        ),
        h('tbody', null, rows),
      ),
    );
  }

  // ---- jobs and checkpoints ----

  function renderJobs() {
    const list = $('job-list');
    if (state.jobs.length === 0) {
      list.replaceChildren(h('li', { class: 'note' }, 'No training jobs yet.'));
      $('job-events').replaceChildren();
      return;
    }
    if (state.jobId === null || !state.jobs.some((job) => job.id === state.jobId)) state.jobId = state.jobs[0].id;
    setChildren(
      list,
      state.jobs.map((job) =>
        h(
          'li',
          null,
          h(
            'button',
            {
              type: 'button',
              'aria-pressed': job.id === state.jobId ? 'true' : 'false',
              'aria-label': `${job.kind} job ${job.id}, ${job.status}`,
              onclick: () => {
                state.jobId = job.id;
                renderJobs();
                refreshEvents();
              },
            },
            h('span', { class: `pill ${job.status}` }, job.status.toLowerCase()),
            h('span', null, job.kind.toUpperCase()),
            progressBar(job.progress),
            h('span', { class: 'when' }, formatTime(job.created_at)),
          ),
        ),
      ),
    );
  }

  function progressBar(progress) {
    const bar = h('span');
    bar.style.width = `${Math.round((progress ?? 0) * 100)}%`;
    return h(
      'span',
      {
        class: 'progress',
        role: 'progressbar',
        'aria-valuemin': 0,
        'aria-valuemax': 100,
        'aria-valuenow': Math.round((progress ?? 0) * 100),
      },
      bar,
    );
  }

  async function refreshEvents() {
    const job = state.jobs.find((candidate) => candidate.id === state.jobId);
    if (job === undefined) return;
    const events = await listAll(`/v1/preview/training-jobs/${job.id}/events`);
    if (state.jobId !== job.id) return;
    const describe = (event) => {
      const data = event.data ?? {};
      if (event.type === 'training_failed') return `failed: ${data.error_message ?? ''}`;
      const parts = Object.entries(data)
        .filter(([, value]) => typeof value === 'number')
        .slice(0, 4)
        .map(([name, value]) => `${name}=${formatNumber(value)}`);
      return `${event.type.replace('_', ' ')}${parts.length > 0 ? ` ${parts.join(' ')}` : ''}`;
    };
    $('job-events').replaceChildren(
      h('strong', null, `Events of job ${job.id.slice(0, 8)}`),
      events.length === 0
        ? h('p', { class: 'note' }, 'No events yet.')
        : h(
            'ol',
            null,
            events.map((event) =>
              h('li', { class: event.type === 'training_failed' ? 'failed' : undefined }, describe(event)),
            ),
          ),
    );
  }

  function renderCheckpoints(checkpoints) {
    if (checkpoints.length === 0) {
      $('checkpoints').replaceChildren(h('p', { class: 'note' }, 'No checkpoints yet: step 0 is the base model.'));
      return;
    }
    $('checkpoints').replaceChildren(
      h(
        'table',
        null,
        h('thead', null, h('tr', null, h('th', null, 'step'), h('th', null, 'metrics'))),
        h(
          'tbody',
          null,
          checkpoints.map((checkpoint) =>
            h(
              'tr',
              null,
              h('td', null, String(checkpoint.step)),
              h(
                'td',
                null,
                Object.entries(checkpoint.metrics)
                  // `loss` and `policy_loss` are usually the same number: show it once.
                  .filter(([name]) => !(name === 'policy_loss' && 'loss' in checkpoint.metrics))
                  .slice(0, 2)
                  .map(([name, value]) => `${name} ${formatNumber(value)}`)
                  .join(' · ') || '—',
              ),
            ),
          ),
        ),
      ),
    );
  }

  // ---- trajectory browser ----

  /** Steps (newest first) at which each split logged groups, from the merged step metrics. */
  function loggedSteps() {
    const bySplit = new Map();
    for (const row of state.metrics) {
      const groups = row.metrics['data/step_num_groups_submitted'];
      if (typeof groups !== 'number' || groups <= 0) continue;
      if (!bySplit.has(row.split)) bySplit.set(row.split, []);
      bySplit.get(row.split).push(row);
    }
    for (const rows of bySplit.values()) rows.sort((a, b) => b.step - a.step);
    return bySplit;
  }

  function renderBrowserControls() {
    const steps = loggedSteps();
    const splits = [...steps.keys()].sort((a, b) => (a === 'train' ? -1 : b === 'train' ? 1 : a.localeCompare(b)));
    if (state.split === null || !steps.has(state.split)) state.split = splits[0] ?? null;
    const rows = state.split === null ? [] : steps.get(state.split);
    if (state.followLatestStep || !rows.some((row) => row.step === state.step)) state.step = rows[0]?.step ?? null;
    const splitSelect = $('split-select');
    setChildren(
      splitSelect,
      splits.map((split) => h('option', { value: split }, split)),
    );
    splitSelect.value = state.split ?? '';
    const stepSelect = $('step-select');
    setChildren(
      stepSelect,
      rows.map((row) =>
        h(
          'option',
          { value: row.step },
          `${row.step} (${row.metrics['data/step_num_groups_submitted']} groups${
            typeof row.metrics.reward === 'number' ? `, reward ${formatNumber(row.metrics.reward)}` : ''
          })`,
        ),
      ),
    );
    stepSelect.value = state.step === null ? '' : String(state.step);
    const row = rows.find((candidate) => candidate.step === state.step);
    return row === undefined ? '' : `${row.updated_at}|${row.metrics['data/step_num_groups_submitted']}`;
  }

  async function refreshGroups(stamp) {
    const key = `${state.modelId}|${state.split}|${state.step}`;
    if (state.split === null || state.step === null) {
      state.groups = [];
      state.groupsKey = key;
      $('groups').replaceChildren(h('p', { class: 'note' }, 'No trajectory groups logged yet.'));
      $('more-groups').hidden = true;
      return;
    }
    if (key === state.groupsKey && stamp === state.groupsStamp) return;
    const page = await api(`/v1/local/models/${state.modelId}/trajectory-groups`, {
      split: state.split,
      step: state.step,
      limit: GROUPS_PER_PAGE,
    });
    state.groups = page.data;
    state.groupsCursor = page.has_more ? page.last_id : null;
    state.groupsClipped = page.has_more && page.data.length < GROUPS_PER_PAGE;
    state.groupsKey = key;
    state.groupsStamp = stamp;
    renderGroups();
  }

  async function moreGroups() {
    if (state.groupsCursor === null) return;
    const page = await api(`/v1/local/models/${state.modelId}/trajectory-groups`, {
      split: state.split,
      step: state.step,
      limit: GROUPS_PER_PAGE,
      after: state.groupsCursor,
    });
    for (const item of page.data) state.groups.push(item);
    state.groupsCursor = page.has_more ? page.last_id : null;
    state.groupsClipped = page.has_more && page.data.length < GROUPS_PER_PAGE;
    renderGroups();
  }

  function meanReward(group) {
    const rewards = group.trajectories.map((trajectory) => trajectory.reward ?? 0);
    return rewards.length === 0 ? 0 : rewards.reduce((sum, reward) => sum + reward, 0) / rewards.length;
  }

  function renderGroups() {
    hideTooltip();
    const direction = state.sort === 'asc' ? 1 : state.sort === 'desc' ? -1 : 0;
    const groups = state.groups.map((item, index) => ({ item, index, mean: meanReward(item.group) }));
    if (direction !== 0) groups.sort((a, b) => direction * (a.mean - b.mean) || a.index - b.index);
    const children = groups.map(({ item, index, mean }) => renderGroup(item.group, index, mean, direction));
    if (groups.length === 0) children.unshift(h('p', { class: 'note' }, 'No groups at this step.'));
    if (state.groupsClipped)
      // The service ends a page early when its groups are large (its page byte limit).
      children.push(
        h(
          'p',
          { class: 'note', id: 'groups-clipped' },
          `Showing ${state.groups.length} group${state.groups.length === 1 ? '' : 's'}: this step's groups are large, so the page ended early. Load more to see the next.`,
        ),
      );
    setChildren($('groups'), children);
    $('more-groups').hidden = state.groupsCursor === null;
  }

  /** System prompts that appear more than once in a group (main and sub-agent conversations), numbered. */
  function repeatedSystemPrompts(group) {
    const counts = new Map();
    for (const trajectory of group.trajectories)
      for (const conversation of [trajectory, ...(trajectory.additional_histories ?? [])])
        for (const item of conversation.messages_and_choices ?? [])
          if (item.role === 'system' || item.role === 'developer') {
            const text = contentText(item.content);
            counts.set(text, (counts.get(text) ?? 0) + 1);
          }
    const shared = new Map();
    for (const [text, count] of counts) if (count > 1) shared.set(text, shared.size + 1);
    return shared;
  }

  /** The step the group's trajectories sampled from, when they all say the same one. */
  function sampledStep(group) {
    const versions = new Set(group.trajectories.map((trajectory) => trajectory.initial_policy_version));
    const [only] = versions;
    return versions.size === 1 && typeof only === 'number' ? only : null;
  }

  function renderGroup(group, index, mean, direction) {
    const shared = repeatedSystemPrompts(group);
    const sampled = sampledStep(group);
    const trajectories = group.trajectories.map((trajectory, position) => ({ trajectory, position }));
    if (direction !== 0)
      trajectories.sort(
        (a, b) => direction * ((a.trajectory.reward ?? 0) - (b.trajectory.reward ?? 0)) || a.position - b.position,
      );
    const exceptions = group.exceptions ?? [];
    return h(
      'article',
      { class: 'group', 'aria-label': `Group ${index + 1}` },
      h(
        'div',
        { class: 'group-head' },
        h('h3', null, `Group ${index + 1}`),
        h(
          'span',
          { class: 'meta' },
          `${group.trajectories.length} trajectories · mean reward ${formatNumber(mean)}${
            exceptions.length > 0 ? ` · ${exceptions.length} failed` : ''
          }${sampled !== null && sampled !== state.step ? ` · sampled at step ${sampled}` : ''}`,
        ),
        metricChips(group.metrics),
      ),
      [...shared].map(([text, number]) =>
        h(
          'details',
          { class: 'system-prompt' },
          h('summary', null, `system prompt ${number}, shown once for the group`),
          h('p', { class: 'text' }, text),
        ),
      ),
      group.logs?.length
        ? h('details', null, h('summary', null, 'group logs'), h('pre', null, clip(group.logs.join('\n'))))
        : null,
      exceptions.map((exception) =>
        h(
          'details',
          { class: 'exception' },
          h('summary', null, clip(`${exception.type}: ${exception.message}`)),
          h('pre', null, clip(exception.traceback)),
        ),
      ),
      h(
        'div',
        { class: 'trajectories' },
        trajectories.map(({ trajectory, position }) => renderTrajectory(trajectory, position, shared)),
      ),
    );
  }

  function metricChips(metrics) {
    const entries = Object.entries(metrics ?? {});
    if (entries.length === 0) return null;
    return h(
      'span',
      { class: 'chips' },
      entries.map(([name, value]) =>
        h('span', { class: 'chip' }, `${name} ${typeof value === 'boolean' ? String(value) : formatNumber(value)}`),
      ),
    );
  }

  function renderTrajectory(trajectory, position, shared) {
    const render = (item) => renderItem(item, shared);
    const reward = trajectory.reward ?? 0;
    const badge = h('span', { class: 'reward', title: 'reward' }, `reward ${formatNumber(reward)}`);
    const colors = rewardColors(reward);
    badge.style.background = colors.background;
    badge.style.color = colors.color;
    const metadata = Object.keys(trajectory.metadata ?? {}).length > 0 ? trajectory.metadata : null;
    return h(
      'section',
      { class: 'trajectory', 'aria-label': `Trajectory ${position + 1}, reward ${formatNumber(reward)}` },
      h('div', { class: 'trajectory-head' }, h('strong', null, `#${position + 1}`), badge),
      metricChips(trajectory.metrics),
      (trajectory.messages_and_choices ?? []).map(render),
      (trajectory.additional_histories ?? []).map((historyItem, index) =>
        h(
          'details',
          { open: true },
          h('summary', null, `sub-agent conversation ${index + 1}`),
          (historyItem.messages_and_choices ?? []).map(render),
        ),
      ),
      trajectory.logs?.length
        ? h('details', null, h('summary', null, 'logs'), h('pre', null, clip(trajectory.logs.join('\n'))))
        : null,
      metadata
        ? h('details', null, h('summary', null, 'metadata'), h('pre', null, clip(JSON.stringify(metadata, null, 2))))
        : null,
    );
  }

  function contentText(content) {
    if (content === null || content === undefined) return '';
    if (typeof content === 'string') return content;
    if (Array.isArray(content))
      return content
        .map((part) => (part.type === 'text' ? part.text : part.type === 'refusal' ? part.refusal : `[${part.type}]`))
        .join('');
    return JSON.stringify(content);
  }

  function toolCalls(calls) {
    return (calls ?? []).map((call) =>
      h(
        'div',
        { class: 'tool-call' },
        call.type === 'custom'
          ? clip(`${call.custom?.name}(${call.custom?.input ?? ''})`)
          : clip(`${call.function?.name}(${call.function?.arguments ?? ''})`),
      ),
    );
  }

  function renderItem(item, shared) {
    if (item.role !== undefined) {
      const text = contentText(item.content);
      const number = (item.role === 'system' || item.role === 'developer') && shared?.get(text);
      if (number)
        return h(
          'div',
          { class: `message ${item.role}` },
          h('div', { class: 'role' }, `${item.role} · prompt ${number} (shown once above)`),
        );
      const label =
        item.role === 'tool' ? `tool result${item.tool_call_id ? ` · ${item.tool_call_id}` : ''}` : item.role;
      return h(
        'div',
        { class: `message ${item.role}` },
        h('div', { class: 'role' }, label),
        text ? h('p', { class: 'text' }, clip(text)) : null,
        toolCalls(item.tool_calls),
      );
    }
    const message = item.message ?? {};
    const tokens = item.logprobs?.content;
    const body =
      Array.isArray(tokens) && tokens.length > 0
        ? h(
            'p',
            // One tab stop for the whole turn (not one per token), described for screen readers.
            { class: 'text tokens', tabindex: 0, 'aria-label': clip(describeTokens(tokens)) },
            tokens.slice(0, MAX_SHOWN_TOKENS).map(renderToken),
            tokens.length > MAX_SHOWN_TOKENS ? ` … (${tokens.length - MAX_SHOWN_TOKENS} more tokens not shown)` : null,
          )
        : h(
            'p',
            { class: 'text' },
            clip(contentText(message.content)) || (message.tool_calls?.length ? '' : '(empty)'),
          );
    return h(
      'div',
      { class: 'message choice' },
      h(
        'div',
        { class: 'role', title: 'A sampled turn: trained on' },
        `choice${item.finish_reason === 'stop' ? '' : ` · ${item.finish_reason}`}`,
      ),
      body,
      toolCalls(message.tool_calls),
    );
  }

  function describeTokens(tokens) {
    const text = tokens.map((token) => token.token).join('');
    const mean = tokens.reduce((sum, token) => sum + token.logprob, 0) / tokens.length;
    const least = tokens.reduce((low, token) => (token.logprob < low.logprob ? token : low));
    return `${text} — ${tokens.length} tokens, mean logprob ${mean.toFixed(2)}, least likely ${JSON.stringify(
      least.token,
    )} at ${least.logprob.toFixed(2)}`;
  }

  function renderToken(token) {
    const probability = Math.exp(token.logprob);
    const alternatives = (token.top_logprobs ?? [])
      .slice(0, 5)
      .map((top) => `${JSON.stringify(top.token)} ${top.logprob.toFixed(3)}`)
      .join('\n');
    const description = `${JSON.stringify(token.token)} logprob ${token.logprob.toFixed(3)} (p=${probability.toFixed(2)})${
      alternatives ? `\ntop:\n${alternatives}` : ''
    }`;
    const span = h('span', { class: 'tok', 'data-logprob': token.logprob, 'data-tip': description }, token.token);
    const unsure = 1 - probability;
    span.style.background = `hsla(${Math.round(140 - unsure * 132)}, ${60 + unsure * 25}%, ${45 + unsure * 10}%, ${0.12 + unsure * 0.5})`;
    return span;
  }

  let tip = null;

  function hideTooltip() {
    if (tip !== null) tip.hidden = true;
  }

  // A tooltip for tokens (the title attribute is slow and not shown on keyboard focus).
  function installTooltip() {
    tip = h('div', { class: 'tooltip', role: 'tooltip', hidden: true });
    document.body.append(tip);
    const show = (event) => {
      const target = event.target.closest?.('.tok');
      if (!target) return;
      tip.textContent = target.dataset.tip;
      tip.hidden = false;
      const box = target.getBoundingClientRect();
      tip.style.left = `${Math.min(box.left, window.innerWidth - 330)}px`;
      tip.style.top = `${box.bottom + 6}px`;
    };
    const hide = (event) => {
      if (event.target.closest?.('.tok')) tip.hidden = true;
    };
    document.addEventListener('mouseover', show);
    document.addEventListener('focusin', show);
    document.addEventListener('mouseout', hide);
    document.addEventListener('focusout', hide);
    document.addEventListener('scroll', hideTooltip, true);
  }

  // ---- the refresh loop ----

  async function refresh() {
    if (state.key === null || state.refreshing) return;
    state.refreshing = true;
    try {
      state.models = await listAll('/v1/local/models');
      showApp();
      if (!state.models.some((model) => model.id === state.modelId)) state.modelId = state.models[0]?.id ?? null;
      renderModels();
      const model = state.models.find((candidate) => candidate.id === state.modelId);
      if (model !== undefined) {
        renderModelHeader(model);
        const [metrics, checkpoints, jobs] = await Promise.all([
          listAll(`/v1/local/models/${model.id}/metrics`),
          api(`/v1/preview/models/${model.id}/checkpoints`, { order: 'desc', limit: 10 }),
          api(`/v1/local/models/${model.id}/jobs`, { limit: 10 }),
        ]);
        if (state.modelId !== model.id) return;
        state.metrics = metrics;
        state.jobs = jobs.data;
        renderMetricSelect();
        renderChart();
        renderCheckpoints(checkpoints.data);
        renderJobs();
        await refreshEvents();
        await refreshGroups(renderBrowserControls());
      }
      setStatus(`Updated ${new Date().toLocaleTimeString()}`);
    } catch (error) {
      if (error instanceof Unauthorized) showLogin(error.message);
      else setStatus(`Cannot reach the service (${error.message}); retrying`, true);
    } finally {
      state.refreshing = false;
    }
  }

  function start() {
    takeKeyFromFragment();
    installTooltip();
    $('login-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const key = $('key-input').value.trim();
      if (!key) return;
      sessionStorage.setItem(KEY_STORAGE, key);
      state.key = key;
      $('key-input').value = '';
      refresh();
    });
    $('logout').addEventListener('click', () => showLogin(''));
    $('metric-select').addEventListener('change', (event) => {
      state.metric = event.target.value;
      renderChart();
    });
    $('split-select').addEventListener('change', (event) => {
      state.split = event.target.value;
      state.followLatestStep = true;
      refreshGroups(renderBrowserControls());
    });
    $('step-select').addEventListener('change', (event) => {
      state.step = Number(event.target.value);
      state.followLatestStep = false;
      refreshGroups(renderBrowserControls());
    });
    $('sort-select').addEventListener('change', (event) => {
      state.sort = event.target.value;
      renderGroups();
    });
    $('more-groups').addEventListener('click', () => moreGroups());
    window.addEventListener('resize', () => {
      if (state.chart !== null) state.chart.setSize({ width: Math.max(320, $('chart').clientWidth), height: 330 });
    });
    if (state.key === null) showLogin('');
    else refresh();
    setInterval(() => {
      if (!document.hidden) refresh();
    }, POLL_MS);
  }

  start();
})();
