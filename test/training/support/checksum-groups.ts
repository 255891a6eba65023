/**
 * Groups to train on from a real (local) model: two scenarios, four short completions each,
 * rewarded by a checksum of the reply's text, so that different replies almost surely get
 * different rewards and each group has something to train.
 */
import { gatherTrajectoryGroups } from 'policyloop';
import type { TrainableModel } from 'policyloop';
import { isChoice } from 'policyloop/schema';
import type { TrajectoryGroup } from 'policyloop/schema';

/** Two groups of four completions of `model`, rewarded by a checksum of each reply (see the module). */
export async function checksumGroups(model: TrainableModel): Promise<TrajectoryGroup[]> {
  const client = model.openai();
  return gatherTrajectoryGroups(
    ['one', 'two'],
    async (scenario) => {
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'user', content: `say ${scenario}` }],
        max_tokens: 6,
      });
    },
    {
      groupSize: 4,
      reward: (trajectory) => {
        const last = trajectory.messages_and_choices.at(-1);
        const text = last !== undefined && isChoice(last) ? String(last.message.content) : '';
        let sum = 0;
        for (const char of text) sum += char.codePointAt(0) ?? 0;
        return (sum % 97) / 97;
      },
      sampledStep: () => model.getStep(),
    },
  );
}
