// The create dialog's spec, and the daemon's errors taken to the field
// they name.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { EMPTY_FORM, FormError, buildSpec, formFieldOfMessage, parseLabels, specFieldOfMessage } from '../src/spec.js';

test('a form becomes a spec; empty optional fields are left to the daemon', () => {
    const spec = JSON.parse(buildSpec({ ...EMPTY_FORM, name: ' web ', cpu_millicores: '1500', memory_mib: '512',
                                        hypervisor_type: 'qemu', image: 'oci:/x:1', labels: 'a=1\nb = two' }));
    assert.deepEqual(spec, {
        name: 'web', hypervisor_type: 'qemu', image: 'oci:/x:1', cpu_millicores: 1500,
        memory_bytes: 512 * 1024 * 1024, labels: { a: '1', b: 'two' },
    });
});

test('numbers out of range go to the daemon, which names the limit', () => {
    const spec = JSON.parse(buildSpec({ ...EMPTY_FORM, name: 'x', cpu_millicores: '50' }));
    assert.equal(spec.cpu_millicores, 50);
});

test('what is not a number is refused on its field before any call', () => {
    assert.throws(() => buildSpec({ ...EMPTY_FORM, name: 'x', memory_mib: 'lots' }),
                  e => e instanceof FormError && e.field === 'memory_mib');
    assert.throws(() => parseLabels('novalue'), e => e instanceof FormError && e.field === 'labels');
});

test('an InvalidArgument message names its field', () => {
    assert.equal(specFieldOfMessage('cpu_millicores: 50 is outside 100–32000'), 'cpu_millicores');
    assert.equal(specFieldOfMessage('disks[0].path: not absolute'), 'disks');
    assert.equal(specFieldOfMessage('labels.tier: too long'), 'labels');
    assert.equal(specFieldOfMessage('the spec is not JSON'), null);
    assert.equal(formFieldOfMessage('memory_bytes: 1 is outside 2 MiB–1 TiB'), 'memory_mib');
    assert.equal(formFieldOfMessage('cpu_millicores: 50 is outside 100–32000'), 'cpu_millicores');
    assert.equal(formFieldOfMessage('ports[0].host_port: taken'), null);
});
