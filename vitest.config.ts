import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * Every test (`npm test`). Files named `*.unit.test.ts` are also the fast tier, `npm run test:unit`
 * (vitest.unit.config.ts): no service, no network training, no demo or examples.
 */
export default defineConfig({
  // The example tasks that tests share import `policyloop` as users do (tsconfig maps it the same way).
  resolve: {
    alias: [{ find: /^policyloop$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) }],
  },
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    // Integration tests start real local services and train small networks: 2 cores are shared.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
