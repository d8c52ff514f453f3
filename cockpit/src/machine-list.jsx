// The machine list: every machine the ObjectManager announced, redrawn
// from signals. Rows are memoized by their machine object, which the
// model replaces only for the machine that changed, so that one change
// among a thousand rows redraws one row.
import React, { memo, useMemo, useRef, useState } from 'react';
import {
    Button, EmptyState, EmptyStateBody, EmptyStateHeader, Label, SearchInput,
    Toolbar, ToolbarContent, ToolbarItem,
} from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';

import cockpit from './cockpit.js';
import { managerCall } from './client.js';
import { CreateDialog } from './create-dialog.jsx';
import { cpuPercent, formatBytes, formatPercent } from './format.js';
import { useInterval, useModel } from './hooks.js';
import { stateColor, stateLabel } from './state.js';

const _ = cockpit.gettext;

// CPU use of every machine with a VMM: Manager.GetAllStats, one call for
// all of them, every few seconds while the list is shown.
const STATS_INTERVAL_MS = 3000;

function useCpuUse() {
    const previous = useRef(new Map());
    const [use, setUse] = useState(new Map());
    useInterval(() => {
        managerCall('GetAllStats', '', [])
                .then(([all]) => {
                    const next = new Map();
                    const percents = new Map();
                    for (const [id, raw] of all) {
                        const stats = {};
                        for (const [k, v] of Object.entries(raw))
                            stats[k] = v.v;
                        next.set(id, stats);
                        const p = cpuPercent(previous.current.get(id), stats);
                        if (p !== null)
                            percents.set(id, p);
                    }
                    previous.current = next;
                    // Nothing runs: nothing to redraw.
                    setUse(current => current.size === 0 && percents.size === 0 ? current : percents);
                })
                .catch(() => {});
    }, STATS_INTERVAL_MS, []);
    return use;
}

export function StateLabel({ state }) {
    return <Label color={stateColor(state)} className="mv-state" data-state={state}>{stateLabel(state)}</Label>;
}

const MachineRow = memo(function MachineRow({ machine, cpu }) {
    const open = () => cockpit.location.go(['machine', machine.Id]);
    return (
        <Tr className="mv-machine-row" data-machine={machine.Name} isClickable onRowClick={open}>
            <Th dataLabel={_("Name")} className="mv-name">
                <Button variant="link" isInline onClick={open}>{machine.Name}</Button>
            </Th>
            <Td dataLabel={_("State")}><StateLabel state={machine.State} /></Td>
            <Td dataLabel={_("vCPUs")} className="mv-vcpus">{machine.VCPUs}</Td>
            <Td dataLabel={_("Memory")} className="mv-memory">{formatBytes(machine.MemoryBytes)}</Td>
            <Td dataLabel={_("Hypervisor")} className="mv-hypervisor">{machine.Hypervisor}</Td>
            <Td dataLabel={_("Health")} className="mv-health">{machine.Health}</Td>
            <Td dataLabel={_("Address")} className="mv-address">{machine.Address}</Td>
            <Td dataLabel={_("CPU use")} className="mv-cpu">{formatPercent(cpu)}</Td>
        </Tr>
    );
});

export function MachineList() {
    const model = useModel();
    const [filter, setFilter] = useState('');
    const [creating, setCreating] = useState(false);
    const cpu = useCpuUse();

    const machines = model.machines;
    const version = model.version;
    const sorted = useMemo(() => model.sortedMachines(), [machines, version]); // eslint-disable-line react-hooks/exhaustive-deps
    const f = filter.trim().toLowerCase();
    const shown = f ? sorted.filter(m => (m.Name || '').toLowerCase().includes(f)) : sorted;

    return (
        <>
            <Toolbar>
                <ToolbarContent>
                    <ToolbarItem>
                        <SearchInput placeholder={_("Filter by name")} value={filter}
                                     onChange={(_event, v) => setFilter(v)} onClear={() => setFilter('')} />
                    </ToolbarItem>
                    <ToolbarItem>
                        <Button variant="primary" id="mv-create" onClick={() => setCreating(true)}>
                            {_("Create machine")}
                        </Button>
                    </ToolbarItem>
                    <ToolbarItem variant="pagination">
                        <span className="mv-count" data-count={sorted.length}>
                            {cockpit.format(cockpit.ngettext("$0 machine", "$0 machines", sorted.length), sorted.length)}
                        </span>
                    </ToolbarItem>
                </ToolbarContent>
            </Toolbar>
            {model.loaded && sorted.length === 0
                ? <EmptyState>
                    <EmptyStateHeader titleText={_("No machines")} headingLevel="h2" />
                    <EmptyStateBody>{_("Create a machine to see it here.")}</EmptyStateBody>
                </EmptyState>
                : <Table aria-label={_("Machines")} variant="compact" id="mv-machines" data-loaded={model.loaded}>
                    <Thead>
                        <Tr>
                            <Th>{_("Name")}</Th>
                            <Th>{_("State")}</Th>
                            <Th>{_("vCPUs")}</Th>
                            <Th>{_("Memory")}</Th>
                            <Th>{_("Hypervisor")}</Th>
                            <Th>{_("Health")}</Th>
                            <Th>{_("Address")}</Th>
                            <Th>{_("CPU use")}</Th>
                        </Tr>
                    </Thead>
                    <Tbody>
                        {shown.map(m => <MachineRow key={m.path} machine={m} cpu={cpu.get(m.Id)} />)}
                    </Tbody>
                </Table>}
            {creating && <CreateDialog onClose={() => setCreating(false)} />}
        </>
    );
}
