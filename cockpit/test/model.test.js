// The model the page keeps from ObjectManager signals alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Model, unwrap } from '../src/model.js';

const M = 'org.microvmd1.Machine';
const path = id => `/org/microvmd1/machine/${id}`;

function machineProps(id, name, state) {
    return {
        Id: { t: 's', v: id },
        Name: { t: 's', v: name },
        State: { t: 's', v: state },
        VCPUs: { t: 'u', v: 1 },
        Labels: { t: 'a{ss}', v: { tier: 'front' } },
    };
}

test('variants are unwrapped all the way down', () => {
    assert.deepEqual(unwrap({ t: 'a{sv}', v: { a: { t: 's', v: 'x' }, b: { t: 'as', v: ['y'] } } }),
                     { a: 'x', b: ['y'] });
    assert.equal(unwrap({ t: 't', v: 7 }), 7);
});

test('GetManagedObjects fills the model; other interfaces are ignored', () => {
    const model = new Model();
    model.load({
        '/org/microvmd1': { 'org.microvmd1.Manager': { Version: { t: 's', v: '0.1.0' } } },
        [path('a')]: { [M]: machineProps('a', 'web', 'Stopped'), 'org.freedesktop.DBus.Peer': {} },
        '/org/microvmd1/snapshot/s': { 'org.microvmd1.Snapshot': { Name: { t: 's', v: 'snap' }, MachineId: { t: 's', v: 'a' } } },
    });
    assert.equal(model.loaded, true);
    assert.equal(model.machines.size, 1);
    assert.equal(model.machines.get(path('a')).Name, 'web');
    assert.deepEqual(model.machines.get(path('a')).Labels, { tier: 'front' });
    assert.equal(model.snapshots.size, 1);
    assert.equal(model.manager.Version, '0.1.0');
    assert.equal(model.machineById('a').path, path('a'));
});

test('signals add, change and remove machines; only the changed one is a new object', () => {
    const model = new Model();
    model.load({ [path('a')]: { [M]: machineProps('a', 'a', 'Stopped') },
                 [path('b')]: { [M]: machineProps('b', 'b', 'Stopped') } });
    const b = model.machines.get(path('b'));

    model.signal('/org/microvmd1', 'org.freedesktop.DBus.ObjectManager', 'InterfacesAdded',
                 [path('c'), { [M]: machineProps('c', 'c', 'Stopped') }]);
    assert.equal(model.machines.size, 3);

    model.signal(path('a'), 'org.freedesktop.DBus.Properties', 'PropertiesChanged',
                 [M, { State: { t: 's', v: 'Running' } }, []]);
    assert.equal(model.machines.get(path('a')).State, 'Running');
    assert.equal(model.machines.get(path('a')).Name, 'a');
    assert.equal(model.machines.get(path('b')), b, 'an unchanged machine keeps its object');

    model.signal('/org/microvmd1', 'org.freedesktop.DBus.ObjectManager', 'InterfacesRemoved', [path('c'), [M]]);
    assert.equal(model.machines.size, 2);
    assert.deepEqual(model.sortedMachines().map(m => m.Name), ['a', 'b']);
});

test('a change to an object not announced is left for InterfacesAdded', () => {
    const model = new Model();
    model.load({});
    model.signal(path('x'), 'org.freedesktop.DBus.Properties', 'PropertiesChanged',
                 [M, { State: { t: 's', v: 'Running' } }, []]);
    assert.equal(model.machines.size, 0);
});

test('invalidated properties are dropped, not read again', () => {
    const model = new Model();
    model.load({ [path('a')]: { [M]: machineProps('a', 'a', 'Stopped') } });
    model.signal(path('a'), 'org.freedesktop.DBus.Properties', 'PropertiesChanged', [M, {}, ['State']]);
    assert.equal('State' in model.machines.get(path('a')), false);
});

test('listeners hear of many changes once per scheduled tick', () => {
    const queued = [];
    const model = new Model(fn => queued.push(fn));
    let heard = 0;
    model.subscribe(() => heard++);
    const objects = {};
    for (let i = 0; i < 1000; i++)
        objects[path(`m${i}`)] = { [M]: machineProps(`m${i}`, `m${i}`, 'Stopped') };
    model.load(objects);
    for (let i = 0; i < 1000; i++)
        model.signal(path(`m${i}`), 'org.freedesktop.DBus.Properties', 'PropertiesChanged',
                     [M, { State: { t: 's', v: 'Running' } }, []]);
    assert.equal(queued.length, 1);
    queued.shift()();
    assert.equal(heard, 1);
    assert.equal(model.machines.get(path('m999')).State, 'Running');
});
