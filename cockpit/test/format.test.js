import { test } from 'node:test';
import assert from 'node:assert/strict';

import { cpuPercent, formatBytes, formatPercent, shortDigest } from '../src/format.js';

test('bytes', () => {
    assert.equal(formatBytes(0), '0 B');
    assert.equal(formatBytes(268435456), '256 MiB');
    assert.equal(formatBytes(1536), '1.5 KiB');
});

test('CPU use between two readings of one VMM', () => {
    const a = { started_at: 1, read_at: 1_000_000, cpu_time_ns: 0 };
    const b = { started_at: 1, read_at: 3_000_000, cpu_time_ns: 1_000_000_000 };
    assert.equal(cpuPercent(a, b), 50);
    assert.equal(cpuPercent(a, { ...b, started_at: 2 }), null, 'another VMM');
    assert.equal(cpuPercent(null, b), null);
    assert.equal(formatPercent(50), '50 %');
    assert.equal(formatPercent(null), '');
});

test('digests are shortened after their algorithm', () => {
    assert.equal(shortDigest('sha256:0123456789abcdef0123'), 'sha256:0123456789ab');
});
