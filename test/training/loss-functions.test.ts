/**
 * `lossFn`: one type for every backend, and a loss the backend does not train with is refused
 * before anything is sampled or sent, naming the loss and the backend. Against the real local
 * service (`ScriptedBackend`, whose engine trains at once) and, for the hosted and Tinker
 * backends, their declared losses without a server.
 */
import { HostedBackend, InvalidArgumentError, RLTrainer, TinkerBackend } from 'policyloop';
import type { LossFn } from 'policyloop/training';
import { describe, expect, it } from 'vitest';
import { refuseUnofferedLoss } from '../../src/training/job-options.js';
import { scriptedModels, yesNoGroups } from '../support/scripted-models.js';

const registered = scriptedModels('losses');
const groups = yesNoGroups;

async function refusal(attempt: Promise<unknown>): Promise<Error> {
  return attempt.then(
    () => {
      throw new Error('Expected a refusal');
    },
    (error: unknown) => error as Error,
  );
}

describe('lossFn on the local backend', () => {
  it('model.train refuses importance_sampling naming the loss and the backend, and sends no job', async () => {
    const { backend, model } = await registered('train-refused');
    const error = await refusal(model.train(groups, { lossFn: 'importance_sampling' }));
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(error.message).toContain("got 'importance_sampling'");
    expect(error.message).toContain("the local backend trains with ('cispo', 'ppo')");
    expect(backend.trainedJobs).toHaveLength(0);
    expect(await model.getStep()).toBe(0);
  });

  it('a loss it offers goes to the engine as the job’s loss_fn', async () => {
    const { backend, model } = await registered('train-ppo');
    await model.train(groups, { lossFn: 'ppo' });
    expect(backend.trainedJobs.map((job) => job.config?.['loss_fn'])).toEqual(['ppo']);
  });

  it('RLTrainer.run refuses it before the first rollout', async () => {
    const { backend, model } = await registered('trainer-refused');
    let rollouts = 0;
    const trainer = new RLTrainer({
      model,
      scenarios: ['a', 'b'],
      rollout: async () => {
        rollouts += 1;
      },
      reward: () => 1,
      groupSize: 2,
      groupsPerStep: 1,
      maxSteps: 1,
      train: { lossFn: 'dro' },
      progress: false,
    });
    const error = await refusal(trainer.run());
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(error.message).toMatch(/`train\.lossFn`.*got 'dro': the local engine has no dro loss/);
    expect(rollouts).toBe(0);
    expect(backend.samples).toHaveLength(0);
  });

  it('a name that is no loss at all is refused by the option check, listing the four', async () => {
    const { model } = await registered('unknown');
    const error = await refusal(model.train(groups, { lossFn: 'grpo' as LossFn }));
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(error.message).toMatch(/importance_sampling.*ppo.*cispo.*dro/);
  });
});

describe('each backend declares its losses', () => {
  const hosted = new HostedBackend({ apiKey: 'test-key' });
  const tinker = new TinkerBackend({ baseURL: 'http://127.0.0.1:9' });

  it('the hosted service: cispo and ppo (its contract’s loss_fn); importance_sampling is refused', () => {
    expect(hosted.lossFns).toEqual(['cispo', 'ppo']);
    expect(() => refuseUnofferedLoss(hosted, 'importance_sampling', 'params.lossFn')).toThrow(
      /the hosted backend trains with \('cispo', 'ppo'\), got 'importance_sampling'/,
    );
  });

  it('a Tinker server: importance_sampling, ppo, cispo and dro, all accepted', () => {
    expect(tinker.lossFns).toEqual(['importance_sampling', 'ppo', 'cispo', 'dro']);
    for (const loss of tinker.lossFns) expect(() => refuseUnofferedLoss(tinker, loss, 'params.lossFn')).not.toThrow();
  });
});
