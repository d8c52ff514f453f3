// Networks, images and volumes: tables of what the ObjectManager
// announced, with create and delete.
import React, { useState } from 'react';
import {
    Button, EmptyState, EmptyStateHeader, Form, FormGroup, Modal, ModalVariant, TextInput, Checkbox,
    Toolbar, ToolbarContent, ToolbarItem,
} from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';

import cockpit from './cockpit.js';
import { call, managerCall, model } from './client.js';
import { ConfirmDialog } from './confirm.jsx';
import { ErrorAlert } from './errors.jsx';
import { formatBytes, formatTime, shortDigest } from './format.js';
import { useModel } from './hooks.js';
import { NameDialog } from './name-dialog.jsx';
import { IMAGE, NETWORK, VOLUME } from './names.js';

const _ = cockpit.gettext;
const MiB = 1024 * 1024;

function machineNames(paths) {
    return (paths || []).map(p => model.machines.get(p)?.Name).filter(Boolean).join(', ');
}

// A table of objects with a Delete action per row.
function ResourceTable({ id, label, columns, rows, rowKey, onDelete, emptyText }) {
    if (rows.length === 0)
        return <EmptyState variant="sm"><EmptyStateHeader titleText={emptyText} headingLevel="h3" /></EmptyState>;
    return (
        <Table variant="compact" aria-label={label} id={id}>
            <Thead>
                <Tr>
                    {columns.map(c => <Th key={c.title}>{c.title}</Th>)}
                    <Th screenReaderText={_("Actions")} />
                </Tr>
            </Thead>
            <Tbody>
                {rows.map(r => (
                    <Tr key={r.path} data-row={rowKey(r)}>
                        {columns.map(c => <Td key={c.title} dataLabel={c.title}>{c.value(r)}</Td>)}
                        <Td isActionCell>
                            <Button variant="link" isDanger onClick={() => onDelete(r)}>{_("Delete")}</Button>
                        </Td>
                    </Tr>
                ))}
            </Tbody>
        </Table>
    );
}

function useDeletion(iface, describe) {
    const [target, setTarget] = useState(null);
    const [error, setError] = useState(null);
    const dialog = target &&
        <ConfirmDialog title={cockpit.format(_("Delete $0?"), describe(target))}
                       confirmLabel={_("Delete")} onClose={() => setTarget(null)}
                       onConfirm={() => call(target.path, iface, 'Delete', '', [], true).catch(setError)} />;
    return { ask: setTarget, dialog, error, clearError: () => setError(null) };
}

export function NetworksPage() {
    useModel();
    const [creating, setCreating] = useState(false);
    const [form, setForm] = useState({ name: '', subnet: '', gateway: '', nat: true, mtu: '' });
    const [error, setError] = useState(null);
    const deletion = useDeletion(NETWORK, n => n.Name);
    const rows = [...model.networks.values()].sort((a, b) => a.Name.localeCompare(b.Name));

    const create = () => {
        const spec = { name: form.name.trim(), subnet: form.subnet.trim(), nat: form.nat };
        if (form.gateway.trim())
            spec.gateway = form.gateway.trim();
        if (form.mtu.trim())
            spec.mtu = Number(form.mtu.trim());
        setError(null);
        managerCall('CreateNetwork', 's', [JSON.stringify(spec)], true)
                .then(() => setCreating(false))
                .catch(setError);
    };
    const field = (name, label) => (
        <FormGroup label={label} fieldId={`mv-network-${name}`}>
            <TextInput id={`mv-network-${name}`} value={form[name]}
                       onChange={(_e, v) => setForm(f => ({ ...f, [name]: v }))} />
        </FormGroup>
    );

    return (
        <>
            <ErrorAlert error={deletion.error} onClose={deletion.clearError} />
            <Toolbar><ToolbarContent><ToolbarItem>
                <Button id="mv-network-create" onClick={() => setCreating(true)}>{_("Create network")}</Button>
            </ToolbarItem></ToolbarContent></Toolbar>
            <ResourceTable id="mv-networks" label={_("Networks")} rows={rows} rowKey={n => n.Name}
                           emptyText={_("No networks")} onDelete={deletion.ask} columns={[
                               { title: _("Name"), value: n => n.Name },
                               { title: _("Subnet"), value: n => n.Subnet },
                               { title: _("Gateway"), value: n => n.Gateway },
                               { title: _("Bridge"), value: n => n.Bridge },
                               { title: _("MTU"), value: n => n.MTU },
                               { title: _("NAT"), value: n => n.NAT ? _("yes") : _("no") },
                               { title: _("Machines"), value: n => machineNames(n.Machines) },
                           ]} />
            {deletion.dialog}
            {creating &&
                <Modal variant={ModalVariant.small} isOpen title={_("Create network")} onClose={() => setCreating(false)}
                       actions={[
                           <Button key="create" variant="primary" onClick={create}>{_("Create")}</Button>,
                           <Button key="cancel" variant="link" onClick={() => setCreating(false)}>{_("Cancel")}</Button>,
                       ]}>
                    <Form isHorizontal onSubmit={e => { e.preventDefault(); create() }}>
                        <ErrorAlert error={error} />
                        {field('name', _("Name"))}
                        {field('subnet', _("Subnet (CIDR)"))}
                        {field('gateway', _("Gateway"))}
                        {field('mtu', _("MTU"))}
                        <Checkbox id="mv-network-nat" label={_("NAT to the host's networks")} isChecked={form.nat}
                                  onChange={(_e, v) => setForm(f => ({ ...f, nat: v }))} />
                    </Form>
                </Modal>}
        </>
    );
}

export function ImagesPage() {
    useModel();
    const [pulling, setPulling] = useState(false);
    const [error, setError] = useState(null);
    const deletion = useDeletion(IMAGE, i => (i.References || [])[0] || shortDigest(i.Digest));
    const rows = [...model.images.values()].sort((a, b) => Number(b.PulledAt) - Number(a.PulledAt));

    const prune = () => {
        setError(null);
        managerCall('PruneImages', '', [], true).catch(setError);
    };

    return (
        <>
            <ErrorAlert error={error || deletion.error} onClose={() => { setError(null); deletion.clearError() }} />
            <Toolbar><ToolbarContent>
                <ToolbarItem><Button id="mv-image-pull" onClick={() => setPulling(true)}>{_("Pull image")}</Button></ToolbarItem>
                <ToolbarItem><Button variant="secondary" onClick={prune}>{_("Remove unused images")}</Button></ToolbarItem>
            </ToolbarContent></Toolbar>
            <ResourceTable id="mv-images" label={_("Images")} rows={rows} rowKey={i => i.Digest}
                           emptyText={_("No images")} onDelete={deletion.ask} columns={[
                               { title: _("References"), value: i => (i.References || []).join(', ') },
                               { title: _("Digest"), value: i => shortDigest(i.Digest) },
                               { title: _("Size"), value: i => formatBytes(i.SizeBytes) },
                               { title: _("Pulled"), value: i => formatTime(i.PulledAt) },
                               { title: _("Used by"), value: i => machineNames(i.UsedBy) },
                           ]} />
            {deletion.dialog}
            {pulling &&
                <NameDialog id="mv-pull-dialog" title={_("Pull image")} label={_("Reference")} actionLabel={_("Pull")}
                            onClose={() => setPulling(false)}
                            onAction={reference => managerCall('PullImage', 'ss', [reference, 'always'], true)} />}
        </>
    );
}

export function VolumesPage() {
    useModel();
    const [creating, setCreating] = useState(false);
    const [size, setSize] = useState('1024');
    const deletion = useDeletion(VOLUME, v => v.Name);
    const rows = [...model.volumes.values()].sort((a, b) => a.Name.localeCompare(b.Name));

    return (
        <>
            <ErrorAlert error={deletion.error} onClose={deletion.clearError} />
            <Toolbar><ToolbarContent><ToolbarItem>
                <Button id="mv-volume-create" onClick={() => setCreating(true)}>{_("Create volume")}</Button>
            </ToolbarItem></ToolbarContent></Toolbar>
            <ResourceTable id="mv-volumes" label={_("Volumes")} rows={rows} rowKey={v => v.Name}
                           emptyText={_("No volumes")} onDelete={deletion.ask} columns={[
                               { title: _("Name"), value: v => v.Name },
                               { title: _("Size"), value: v => formatBytes(v.SizeBytes) },
                               { title: _("Created"), value: v => formatTime(v.CreatedAt) },
                               { title: _("Attached to"), value: v => machineNames(v.AttachedTo) },
                               { title: _("Held by"), value: v => machineNames(v.HeldBy && v.HeldBy !== '/' ? [v.HeldBy] : []) },
                           ]} />
            {deletion.dialog}
            {creating &&
                <NameDialog id="mv-volume-dialog" title={_("Create volume")} label={_("Name")} actionLabel={_("Create")}
                            onClose={() => setCreating(false)}
                            onAction={name => {
                                if (!/^\d+$/.test(size.trim()))
                                    return Promise.reject(Object.assign(new Error(_("The size is a number of MiB")), { field: true }));
                                return managerCall('CreateVolume', 's', [JSON.stringify({ name, size_bytes: Number(size) * MiB })], true);
                            }}>
                    <FormGroup label={_("Size (MiB)")} fieldId="mv-volume-size">
                        <TextInput id="mv-volume-size" value={size} onChange={(_e, v) => setSize(v)} />
                    </FormGroup>
                </NameDialog>}
        </>
    );
}
