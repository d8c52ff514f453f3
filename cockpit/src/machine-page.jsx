// One machine: its properties and generations as the signals left them,
// the actions, the spec, the console, the logs, CPU and memory, and its
// snapshots.
import React, { useEffect, useState } from 'react';
import {
    Alert, Breadcrumb, BreadcrumbItem, Button, Card, CardBody, CardTitle, Checkbox, CodeBlock,
    CodeBlockCode, DescriptionList, DescriptionListDescription, DescriptionListGroup,
    DescriptionListTerm, EmptyState, EmptyStateHeader, Flex, FlexItem, Gallery, PageSection, Tab,
    TabTitleText, Tabs, Title,
} from '@patternfly/react-core';

import cockpit from './cockpit.js';
import { call, model } from './client.js';
import { Console } from './console.jsx';
import { UsageCharts } from './charts.jsx';
import { ConfirmDialog } from './confirm.jsx';
import { ErrorAlert } from './errors.jsx';
import { formatBytes, formatTime } from './format.js';
import { useModel } from './hooks.js';
import { Logs } from './logs.jsx';
import { StateLabel } from './machine-list.jsx';
import { MACHINE } from './names.js';
import { Snapshots } from './snapshots.jsx';
import { ACTIONS, actionAllowed, hasVmm } from './state.js';

const _ = cockpit.gettext;

function Properties({ items, id }) {
    return (
        <DescriptionList isCompact isHorizontal id={id}>
            {items.filter(([, value]) => value !== undefined && value !== null && value !== '').map(([term, value, key]) => (
                <DescriptionListGroup key={term}>
                    <DescriptionListTerm>{term}</DescriptionListTerm>
                    <DescriptionListDescription data-property={key}>{value}</DescriptionListDescription>
                </DescriptionListGroup>
            ))}
        </DescriptionList>
    );
}

function Overview({ machine: m }) {
    const labels = Object.entries(m.Labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
    return (
        <Gallery hasGutter minWidths={{ default: '380px' }}>
            <Card isCompact>
                <CardTitle>{_("Machine")}</CardTitle>
                <CardBody>
                    <Properties id="mv-properties" items={[
                        [_("ID"), m.Id, 'Id'],
                        [_("State"), m.State, 'State'],
                        [_("Desired state"), m.DesiredState, 'DesiredState'],
                        [_("Error"), m.StateError, 'StateError'],
                        [_("Phase"), m.Phase, 'Phase'],
                        [_("Operation"), m.OperationId, 'OperationId'],
                        [_("Hypervisor"), m.Hypervisor, 'Hypervisor'],
                        [_("vCPUs"), m.VCPUs, 'VCPUs'],
                        [_("CPU (millicores)"), m.CpuMillicores, 'CpuMillicores'],
                        [_("Memory"), formatBytes(m.MemoryBytes), 'MemoryBytes'],
                        [_("Image"), m.Image, 'Image'],
                        [_("Image digest"), m.ImageDigest, 'ImageDigest'],
                        [_("Address"), m.Address, 'Address'],
                        [_("Health"), m.Health, 'Health'],
                        [_("Agent"), m.AgentVersion, 'AgentVersion'],
                        [_("Labels"), labels, 'Labels'],
                    ]} />
                </CardBody>
            </Card>
            <Card isCompact>
                <CardTitle>{_("Generations and times")}</CardTitle>
                <CardBody>
                    <Properties id="mv-generations" items={[
                        [_("Desired generation"), String(m.DesiredGeneration ?? ''), 'DesiredGeneration'],
                        [_("Observed generation"), String(m.ObservedGeneration ?? ''), 'ObservedGeneration'],
                        [_("Specification generation"), String(m.SpecificationGeneration ?? ''), 'SpecificationGeneration'],
                        [_("Restart generation"), String(m.RestartGeneration ?? ''), 'RestartGeneration'],
                        [_("Restarts"), String(m.RestartCount ?? ''), 'RestartCount'],
                        [_("Created"), formatTime(m.CreatedAt), 'CreatedAt'],
                        [_("Updated"), formatTime(m.UpdatedAt), 'UpdatedAt'],
                        [_("Started"), formatTime(m.StartedAt), 'StartedAt'],
                        [_("Finished"), formatTime(m.FinishedAt), 'FinishedAt'],
                        [_("Exit code"), m.FinishedAt ? String(m.ExitCode) : '', 'ExitCode'],
                    ]} />
                </CardBody>
            </Card>
        </Gallery>
    );
}

// The spec, read with GetSpec when shown and again when its generation
// rises.
function Spec({ machine }) {
    const [spec, setSpec] = useState(null);
    const [error, setError] = useState(null);
    useEffect(() => {
        call(machine.path, MACHINE, 'GetSpec', '', [])
                .then(([json]) => setSpec(JSON.stringify(JSON.parse(json), null, 2)))
                .catch(setError);
    }, [machine.path, machine.SpecificationGeneration]);
    if (error)
        return <ErrorAlert error={error} />;
    return (
        <CodeBlock id="mv-spec"><CodeBlockCode>{spec ?? _("Loading...")}</CodeBlockCode></CodeBlock>
    );
}

function Actions({ machine, onError }) {
    const [busy, setBusy] = useState(null);
    const [confirm, setConfirm] = useState(null);
    const [force, setForce] = useState(false);

    const run = (method, args = [], type = '') => {
        setBusy(method);
        onError(null);
        return call(machine.path, MACHINE, method, type, args, true)
                .catch(err => onError(err))
                .finally(() => setBusy(null));
    };

    const ask = action => {
        if (action.destructive)
            setConfirm(action);
        else
            run(action.method);
    };

    const remove = () => {
        onError(null);
        return call(machine.path, MACHINE, 'Delete', 'b', [force], true)
                .then(() => cockpit.location.go([]))
                .catch(err => onError(err));
    };

    return (
        <Flex className="mv-actions">
            {ACTIONS.map(action => (
                <FlexItem key={action.method}>
                    <Button variant={action.method === 'Start' ? 'primary' : 'secondary'}
                            id={`mv-action-${action.method.toLowerCase()}`}
                            isDisabled={!!busy || !actionAllowed(action, machine.State)}
                            isLoading={busy === action.method}
                            onClick={() => ask(action)}>
                        {action.label}
                    </Button>
                </FlexItem>
            ))}
            <FlexItem>
                <Button variant="danger" id="mv-action-delete" isDisabled={!!busy}
                        onClick={() => setConfirm({ method: 'Delete' })}>
                    {_("Delete")}
                </Button>
            </FlexItem>
            {confirm && confirm.method === 'Delete' &&
                <ConfirmDialog title={cockpit.format(_("Delete $0?"), machine.Name)}
                               body={_("The machine's record, its disks of its own and its logs are removed.")}
                               confirmLabel={_("Delete")} onConfirm={remove}
                               onClose={() => setConfirm(null)}>
                    <Checkbox id="mv-delete-force" label={_("Stop it first if it runs")}
                              isChecked={force} onChange={(_e, v) => setForce(v)} />
                </ConfirmDialog>}
            {confirm && confirm.method !== 'Delete' &&
                <ConfirmDialog title={cockpit.format(confirm.method === 'Stop' ? _("Stop $0?") : _("Restart $0?"), machine.Name)}
                               body={_("The guest is shut down; what it has not saved is lost.")}
                               confirmLabel={confirm.label}
                               onConfirm={() => run(confirm.method)}
                               onClose={() => setConfirm(null)} />}
        </Flex>
    );
}

export function MachinePage({ id, tab }) {
    useModel();
    const [error, setError] = useState(null);
    const machine = model.machineById(id);

    if (!machine) {
        return (
            <PageSection>
                <Breadcrumb>
                    <BreadcrumbItem to="#/">{_("Machines")}</BreadcrumbItem>
                </Breadcrumb>
                <EmptyState>
                    <EmptyStateHeader titleText={model.loaded ? _("This machine is gone") : _("Loading...")} headingLevel="h2" />
                </EmptyState>
            </PageSection>
        );
    }

    const active = tab || 'overview';
    const select = (_event, key) => cockpit.location.go(['machine', id, key]);

    return (
        <>
            <PageSection variant="light" className="mv-machine-header">
                <Breadcrumb>
                    <BreadcrumbItem to="#/">{_("Machines")}</BreadcrumbItem>
                    <BreadcrumbItem isActive>{machine.Name}</BreadcrumbItem>
                </Breadcrumb>
                <Flex alignItems={{ default: 'alignItemsCenter' }}>
                    <FlexItem><Title headingLevel="h1" id="mv-machine-name">{machine.Name}</Title></FlexItem>
                    <FlexItem id="mv-machine-state"><StateLabel state={machine.State} /></FlexItem>
                </Flex>
                <Actions machine={machine} onError={setError} />
                <ErrorAlert error={error} onClose={() => setError(null)} />
                {machine.State === 'Failed' && machine.StateError &&
                    <Alert isInline variant="danger" title={_("The machine failed")}>{machine.StateError}</Alert>}
            </PageSection>
            <PageSection>
                <Tabs activeKey={active} onSelect={select} mountOnEnter unmountOnExit id="mv-machine-tabs">
                    <Tab eventKey="overview" title={<TabTitleText>{_("Overview")}</TabTitleText>}>
                        <Overview machine={machine} />
                    </Tab>
                    <Tab eventKey="usage" title={<TabTitleText>{_("Usage")}</TabTitleText>} id="mv-tab-usage">
                        {hasVmm(machine.State)
                            ? <UsageCharts machine={machine} />
                            : <p>{_("Usage is measured while the machine runs.")}</p>}
                    </Tab>
                    <Tab eventKey="console" title={<TabTitleText>{_("Console")}</TabTitleText>} id="mv-tab-console">
                        <Console machine={machine} />
                    </Tab>
                    <Tab eventKey="logs" title={<TabTitleText>{_("Logs")}</TabTitleText>} id="mv-tab-logs">
                        <Logs machine={machine} />
                    </Tab>
                    <Tab eventKey="spec" title={<TabTitleText>{_("Spec")}</TabTitleText>} id="mv-tab-spec">
                        <Spec machine={machine} />
                    </Tab>
                    <Tab eventKey="snapshots" title={<TabTitleText>{_("Snapshots")}</TabTitleText>} id="mv-tab-snapshots">
                        <Snapshots machine={machine} />
                    </Tab>
                </Tabs>
            </PageSection>
        </>
    );
}
