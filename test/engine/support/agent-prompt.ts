/**
 * A realistic small agent's chat-completions request, as the AI SDK sends it in a tool loop: a
 * system prompt, three tools with JSON schemas, and four turns (user, assistant tool call, tool
 * result, assistant tool call, tool result, ...), about 6,000 characters once rendered. Used by
 * bench/agent-context.ts and the engine's context tests. Nothing here is in the BPE corpus.
 */
import type { ChatCompletionMessageParam, ChatCompletionToolParam } from 'policyloop/schema';

const SYSTEM = [
  'You are Harbor, the operations assistant of a small shipping company that runs container barges between river ports.',
  'You help dispatchers answer questions about bookings, vessel positions and port schedules.',
  'Always look facts up with the tools instead of guessing: a wrong arrival time costs the customer a day.',
  'When a question needs several facts, call one tool at a time and wait for its result before the next call.',
  'Quote booking references exactly as the tools return them (for example BK-20417), and give times in the port local time with the time zone.',
  'If a tool returns an error, explain it in one sentence and suggest what the dispatcher could try instead.',
  'Keep answers short: at most three sentences, then a list of the facts you used, one per line.',
  'Never reveal internal tool names or raw JSON to the dispatcher, and never promise a delivery date that the schedule does not show.',
  'If the dispatcher asks for something outside shipping operations, say politely that you can only help with bookings, vessels and ports.',
  'The dispatchers work in Duisburg, Nijmegen and Rotterdam; they are experienced, so skip explanations of how barges, locks and berths work.',
  'Low water on the Rhine slows barges down: when a vessel report mentions it, add the delay to the estimated time of arrival and say so.',
  'A berth slot marked tentative may still move; only a confirmed slot is a promise the port has made to us, and the customer should hear the difference.',
  'When two facts disagree, for example a schedule and a vessel report, trust the newer one and mention the older one as outdated.',
].join(' ');

/** The three tools, in the shape the AI SDK sends (JSON schema draft-07 parameters). */
export const AGENT_TOOLS: ChatCompletionToolParam[] = [
  {
    type: 'function',
    function: {
      name: 'lookup_booking',
      description:
        'Finds a booking by its reference and returns the customer, the cargo, the origin and destination ports, the vessel assigned and the current status.',
      parameters: {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: {
          reference: { type: 'string', description: 'Booking reference, such as BK-20417.' },
          include_history: {
            type: 'boolean',
            description: 'Also return the status changes of the booking, newest first.',
          },
        },
        required: ['reference'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'vessel_position',
      description:
        'Returns the last reported position of a vessel: latitude, longitude, speed over ground in knots, heading, the next port and the estimated time of arrival there.',
      parameters: {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: {
          vessel: { type: 'string', description: 'Vessel name or its registration number.' },
          max_age_minutes: {
            type: 'integer',
            minimum: 1,
            maximum: 1440,
            description: 'Ignore reports older than this many minutes.',
          },
        },
        required: ['vessel'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'port_schedule',
      description:
        'Lists the berth slots of a port for one day: vessel, berth, arrival and departure times, and whether the slot is confirmed or tentative.',
      parameters: {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: {
          port: { type: 'string', description: 'Port code, such as DEDUI for Duisburg or NLRTM for Rotterdam.' },
          date: { type: 'string', format: 'date', description: 'Day of the schedule, YYYY-MM-DD.' },
          status: {
            type: 'string',
            enum: ['any', 'confirmed', 'tentative'],
            description: 'Only slots with this status.',
          },
        },
        required: ['port', 'date'],
        additionalProperties: false,
      },
    },
  },
];

function call(id: string, name: string, args: Record<string, unknown>): ChatCompletionMessageParam {
  return {
    role: 'assistant',
    content: null,
    tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
  };
}

/**
 * The messages of the agent's fifth model call (four turns of the user and the agent before it):
 * system, user, three tool calls with their results, the answer, a follow-up question.
 * `variant` changes the booking so that prompts of one batch differ.
 */
export function agentMessages(variant = 0): ChatCompletionMessageParam[] {
  const reference = `BK-${20417 + variant}`;
  return [
    { role: 'system', content: SYSTEM },
    {
      role: 'user',
      content: `Hi Harbor, the customer behind booking ${reference} is on the phone and wants to know when their two containers of machine parts will reach Rotterdam, and whether the barge is running late. Can you check the booking, where the barge is right now, and what the Rotterdam schedule looks like for tomorrow?`,
    },
    call('call_1', 'lookup_booking', { reference, include_history: true }),
    {
      role: 'tool',
      tool_call_id: 'call_1',
      content: JSON.stringify({
        reference,
        customer: 'Vogel Maschinenbau GmbH',
        cargo: { containers: 2, type: '40ft high cube', contents: 'machine parts', weight_tonnes: 31.4 },
        origin: 'DEDUI',
        destination: 'NLRTM',
        vessel: 'Rhenus Aurora',
        status: 'in transit',
        history: [
          { at: '2026-11-22T06:40:00+01:00', status: 'in transit', note: 'left Duisburg terminal 3' },
          { at: '2026-11-21T18:05:00+01:00', status: 'loaded', note: 'both containers on board' },
          { at: '2026-11-20T09:12:00+01:00', status: 'confirmed', note: 'slot booked by phone' },
        ],
      }),
    },
    call('call_2', 'vessel_position', { vessel: 'Rhenus Aurora', max_age_minutes: 60 }),
    {
      role: 'tool',
      tool_call_id: 'call_2',
      content: JSON.stringify({
        vessel: 'Rhenus Aurora',
        reported_at: '2026-11-22T14:52:00+01:00',
        latitude: 51.8437,
        longitude: 5.8661,
        speed_knots: 7.2,
        heading: 284,
        next_port: 'NLRTM',
        eta: '2026-11-23T09:30:00+01:00',
        remarks: 'low water near Nijmegen, speed reduced since 11:00',
      }),
    },
    call('call_3', 'port_schedule', { port: 'NLRTM', date: '2026-11-23', status: 'any' }),
    {
      role: 'tool',
      tool_call_id: 'call_3',
      content: JSON.stringify({
        port: 'NLRTM',
        date: '2026-11-23',
        slots: [
          { vessel: 'Maas Trader', berth: 'Waalhaven 4', arrival: '06:00', departure: '09:00', status: 'confirmed' },
          { vessel: 'Rhenus Aurora', berth: 'Waalhaven 6', arrival: '08:30', departure: '12:00', status: 'confirmed' },
          { vessel: 'Lena Marie', berth: 'Eemhaven 2', arrival: '10:15', departure: '14:45', status: 'tentative' },
          { vessel: 'Stolt Ijssel', berth: 'Waalhaven 6', arrival: '12:30', departure: '16:00', status: 'tentative' },
        ],
      }),
    },
    { role: 'assistant', content: agentAnswer(variant) },
    {
      role: 'user',
      content:
        'Thanks. The customer asks whether the containers could be unloaded at Eemhaven instead, because their truck is booked there at 11:00. Is there a free slot at Eemhaven tomorrow morning, and would that change the arrival time?',
    },
  ];
}

/** The assistant's final answer for {@link agentMessages} (what a demonstration would teach). */
export function agentAnswer(variant = 0): string {
  return `Booking BK-${20417 + variant} (2 containers of machine parts) is on the Rhenus Aurora, which is near Nijmegen and running about an hour late because of low water. It should reach Rotterdam at 09:30 CET tomorrow, an hour after its confirmed 08:30 slot at Waalhaven 6.`;
}
