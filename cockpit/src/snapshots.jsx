// A machine's snapshots, from the ObjectManager like everything else:
// create, restore, fork, delete.
import React, { useState } from 'react';
import { Button, EmptyState, EmptyStateHeader, Toolbar, ToolbarContent, ToolbarItem } from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';

import cockpit from './cockpit.js';
import { call, model } from './client.js';
import { ConfirmDialog } from './confirm.jsx';
import { ErrorAlert } from './errors.jsx';
import { formatBytes, formatTime } from './format.js';
import { useModel } from './hooks.js';
import { NameDialog } from './name-dialog.jsx';
import { MACHINE, SNAPSHOT } from './names.js';

const _ = cockpit.gettext;

export function Snapshots({ machine }) {
    useModel();
    const [dialog, setDialog] = useState(null);
    const [error, setError] = useState(null);
    const snapshots = [...model.snapshots.values()]
            .filter(s => s.MachineId === machine.Id)
            .sort((a, b) => Number(a.CreatedAt) - Number(b.CreatedAt));

    const act = promise => promise.catch(err => setError(err));

    return (
        <>
            <ErrorAlert error={error} onClose={() => setError(null)} />
            <Toolbar>
                <ToolbarContent>
                    <ToolbarItem>
                        <Button id="mv-snapshot-create" variant="secondary" onClick={() => setDialog({ kind: 'create' })}>
                            {_("Create snapshot")}
                        </Button>
                    </ToolbarItem>
                </ToolbarContent>
            </Toolbar>
            {snapshots.length === 0
                ? <EmptyState variant="xs"><EmptyStateHeader titleText={_("No snapshots")} headingLevel="h3" /></EmptyState>
                : <Table variant="compact" aria-label={_("Snapshots")} id="mv-snapshots">
                    <Thead>
                        <Tr>
                            <Th>{_("Name")}</Th><Th>{_("Kind")}</Th><Th>{_("Size")}</Th><Th>{_("Created")}</Th>
                            <Th screenReaderText={_("Actions")} />
                        </Tr>
                    </Thead>
                    <Tbody>
                        {snapshots.map(s => (
                            <Tr key={s.path} data-snapshot={s.Name}>
                                <Td>{s.Name}</Td>
                                <Td>{s.Kind}</Td>
                                <Td>{formatBytes(s.SizeBytes)}</Td>
                                <Td>{formatTime(s.CreatedAt)}</Td>
                                <Td isActionCell>
                                    <Button variant="link" onClick={() => setDialog({ kind: 'restore', snapshot: s })}>{_("Restore")}</Button>
                                    <Button variant="link" onClick={() => setDialog({ kind: 'fork', snapshot: s })}>{_("Fork")}</Button>
                                    <Button variant="link" isDanger onClick={() => setDialog({ kind: 'delete', snapshot: s })}>{_("Delete")}</Button>
                                </Td>
                            </Tr>
                        ))}
                    </Tbody>
                </Table>}
            {dialog?.kind === 'create' &&
                <NameDialog id="mv-snapshot-dialog" title={_("Create snapshot")} label={_("Name")}
                            actionLabel={_("Create")} onClose={() => setDialog(null)}
                            onAction={name => call(machine.path, MACHINE, 'CreateSnapshot', 's', [name], true)} />}
            {dialog?.kind === 'fork' &&
                <NameDialog id="mv-fork-dialog" title={cockpit.format(_("Fork $0"), dialog.snapshot.Name)}
                            label={_("Name of the new machine")} actionLabel={_("Fork")}
                            onClose={() => setDialog(null)}
                            onAction={name => call(dialog.snapshot.path, SNAPSHOT, 'Fork', 's',
                                                   [JSON.stringify({ name })], true)} />}
            {dialog?.kind === 'restore' &&
                <ConfirmDialog title={cockpit.format(_("Restore $0?"), dialog.snapshot.Name)}
                               body={_("The stopped machine is put back as it was when the snapshot was taken.")}
                               confirmLabel={_("Restore")} onClose={() => setDialog(null)}
                               onConfirm={() => act(call(dialog.snapshot.path, SNAPSHOT, 'Restore', '', [], true))} />}
            {dialog?.kind === 'delete' &&
                <ConfirmDialog title={cockpit.format(_("Delete snapshot $0?"), dialog.snapshot.Name)}
                               body={_("The snapshot's files are removed.")}
                               confirmLabel={_("Delete")} onClose={() => setDialog(null)}
                               onConfirm={() => act(call(dialog.snapshot.path, SNAPSHOT, 'Delete', '', [], true))} />}
        </>
    );
}
