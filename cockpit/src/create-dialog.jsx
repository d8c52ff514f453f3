// The create dialog: a form that becomes a spec document for
// Manager.CreateMachine. The daemon validates; an InvalidArgument that
// names a field is shown on that field, in the daemon's words.
import React, { useEffect, useState } from 'react';
import {
    Alert, Button, Checkbox, Form, FormGroup, FormHelperText, FormSelect, FormSelectOption,
    HelperText, HelperTextItem, Modal, ModalVariant, TextArea, TextInput,
} from '@patternfly/react-core';

import cockpit from './cockpit.js';
import { call, managerCall, model } from './client.js';
import { ErrorAlert } from './errors.jsx';
import { useModel } from './hooks.js';
import { ERROR_INVALID_ARGUMENT, MACHINE, MANAGER, MANAGER_PATH, PROPERTIES } from './names.js';
import { EMPTY_FORM, FormError, buildSpec, formFieldOfMessage } from './spec.js';

const _ = cockpit.gettext;

function Field({ id, label, error, helper, children, isRequired }) {
    return (
        <FormGroup label={label} fieldId={`mv-create-${id}`} isRequired={isRequired}>
            {children}
            {(error || helper) &&
                <FormHelperText>
                    <HelperText>
                        <HelperTextItem variant={error ? 'error' : 'default'}
                                        id={`mv-create-${id}-helper`}
                                        className={error ? 'mv-field-error' : undefined}
                                        data-field={id}>
                            {error || helper}
                        </HelperTextItem>
                    </HelperText>
                </FormHelperText>}
        </FormGroup>
    );
}

export function CreateDialog({ onClose }) {
    useModel();
    const [form, setForm] = useState({ ...EMPTY_FORM });
    const [fieldError, setFieldError] = useState({});
    const [error, setError] = useState(null);
    const [busy, setBusy] = useState(false);

    const set = name => (_event, value) => {
        setForm(f => ({ ...f, [name]: value }));
        setFieldError(e => ({ ...e, [name]: undefined }));
    };
    const text = (name, props = {}) => (
        <TextInput id={`mv-create-${name}`} name={name} value={form[name]} onChange={set(name)}
                   validated={fieldError[name] ? 'error' : 'default'} {...props} />
    );

    // The hypervisors this host has (Manager.Hypervisors, a(ss): type and
    // version), read when the dialog opens: the ObjectManager lists the
    // objects below the manager, not the manager itself.
    const [hypervisors, setHypervisors] = useState([]);
    useEffect(() => {
        call(MANAGER_PATH, PROPERTIES, 'Get', 'ss', [MANAGER, 'Hypervisors'])
                .then(([variant]) => setHypervisors([...new Set((variant.v || []).map(h => h[0]))]))
                .catch(() => {});
    }, []);
    const networks = [...model.networks.values()].map(n => n.Name).sort();

    const create = () => {
        let spec;
        setError(null);
        setFieldError({});
        try {
            spec = buildSpec(form);
        } catch (e) {
            if (e instanceof FormError) {
                setFieldError({ [e.field]: e.message });
                return;
            }
            throw e;
        }
        setBusy(true);
        managerCall('CreateMachine', 'st', [spec, 0])
                .then(([path]) => form.start ? call(path, MACHINE, 'Start', '', [], true) : null)
                .then(() => {
                    setBusy(false);
                    onClose();
                })
                .catch(err => {
                    setBusy(false);
                    const field = err?.name === ERROR_INVALID_ARGUMENT ? formFieldOfMessage(err.message) : null;
                    if (field)
                        setFieldError({ [field]: err.message });
                    else
                        setError(err);
                });
    };

    return (
        <Modal id="mv-create-dialog" variant={ModalVariant.medium} isOpen onClose={onClose}
               title={_("Create machine")}
               actions={[
                   <Button key="create" id="mv-create-submit" variant="primary" isLoading={busy}
                           isDisabled={busy} onClick={create}>
                       {_("Create")}
                   </Button>,
                   <Button key="cancel" variant="link" onClick={onClose}>{_("Cancel")}</Button>,
               ]}>
            <Form isHorizontal onSubmit={e => { e.preventDefault(); create() }}>
                <ErrorAlert error={error} title={_("The machine could not be created")} />
                <Field id="name" label={_("Name")} error={fieldError.name} isRequired>
                    {text('name')}
                </Field>
                <Field id="hypervisor_type" label={_("Hypervisor")} error={fieldError.hypervisor_type}>
                    <FormSelect id="mv-create-hypervisor_type" value={form.hypervisor_type}
                                onChange={set('hypervisor_type')}>
                        <FormSelectOption value="" label={_("Default")} />
                        {hypervisors.map(h => <FormSelectOption key={h} value={h} label={h} />)}
                    </FormSelect>
                </Field>
                <Field id="image" label={_("Image")} error={fieldError.image}
                       helper={_("A registry reference, an https:// OCI archive or oci:DIR:TAG; or give a kernel")}>
                    {text('image')}
                </Field>
                <Field id="kernel" label={_("Kernel")} error={fieldError.kernel}>{text('kernel')}</Field>
                <Field id="initrd" label={_("Initrd")} error={fieldError.initrd}>{text('initrd')}</Field>
                <Field id="kernel_args" label={_("Kernel arguments")} error={fieldError.kernel_args}>
                    {text('kernel_args')}
                </Field>
                <Field id="cpu_millicores" label={_("CPU (millicores)")} error={fieldError.cpu_millicores}
                       helper={_("1000 millicores are one vCPU")}>
                    {text('cpu_millicores', { inputMode: 'numeric' })}
                </Field>
                <Field id="memory_mib" label={_("Memory (MiB)")} error={fieldError.memory_mib}>
                    {text('memory_mib', { inputMode: 'numeric' })}
                </Field>
                <Field id="disk_mib" label={_("Overlay disk (MiB)")} error={fieldError.disk_mib}>
                    {text('disk_mib', { inputMode: 'numeric' })}
                </Field>
                <Field id="network_name" label={_("Network")} error={fieldError.network_name}>
                    <FormSelect id="mv-create-network_name" value={form.network_name}
                                onChange={set('network_name')}>
                        <FormSelectOption value="" label={_("None")} />
                        {networks.map(n => <FormSelectOption key={n} value={n} label={n} />)}
                    </FormSelect>
                </Field>
                <Field id="labels" label={_("Labels")} error={fieldError.labels} helper={_("KEY=VALUE, one per line")}>
                    <TextArea id="mv-create-labels" value={form.labels} onChange={set('labels')}
                              validated={fieldError.labels ? 'error' : 'default'} />
                </Field>
                <FormGroup fieldId="mv-create-start">
                    <Checkbox id="mv-create-start" label={_("Start once created")} isChecked={form.start}
                              onChange={set('start')} />
                </FormGroup>
                {fieldError._ && <Alert isInline variant="danger" title={fieldError._} />}
            </Form>
        </Modal>
    );
}
