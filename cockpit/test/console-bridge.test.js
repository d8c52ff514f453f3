import { test } from 'node:test';
import assert from 'node:assert/strict';

import { consoleBridge } from '../src/console-bridge.js';

test('the console bridge as cockpit reaches it', () => {
    assert.deepEqual(consoleBridge('ws://127.0.0.1:9478/console'),
                     { address: '127.0.0.1', port: 9478, path: '/console', tls: false });
    assert.deepEqual(consoleBridge('wss://[::1]:9478/console'),
                     { address: '::1', port: 9478, path: '/console', tls: true });
    assert.equal(consoleBridge(''), null, 'the bridge is off');
    assert.equal(consoleBridge('http://127.0.0.1:9478/console'), null);
    assert.equal(consoleBridge('ws://evil.example:9478/console'), null, 'an address, never a name');
    assert.equal(consoleBridge('ws://127.0.0.1:0/console'), null);
    assert.equal(consoleBridge('ws://127.0.0.1:9478/console?token=x'), null);
});
