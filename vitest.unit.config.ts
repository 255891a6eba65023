import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * The fast tier (`npm run test:unit`): the files named `*.unit.test.ts`, which listen on no port,
 * train no network and run no demo or example. They may run the local service in-process over a
 * scripted engine (`ScriptedBackend` of `policyloop/testing`: no socket, no tfjs, milliseconds a
 * step), which is how the trainer's loops are tested here. `npm test` runs them along with
 * everything else.
 */
export default defineConfig({
  // Everything of the base config, the entries mapping (`policyloop`, `policyloop/training`, ...) included.
  ...base,
  test: {
    ...base.test,
    include: ['test/**/*.unit.test.ts', 'src/**/*.unit.test.ts'],
  },
});
