// A dialog that asks for one name and runs an action with it; the
// daemon's refusal is shown on the field.
import React, { useState } from 'react';
import {
    Button, Form, FormGroup, FormHelperText, HelperText, HelperTextItem, Modal, ModalVariant, TextInput,
} from '@patternfly/react-core';

import cockpit from './cockpit.js';
import { ErrorAlert } from './errors.jsx';
import { ERROR_INVALID_ARGUMENT } from './names.js';

const _ = cockpit.gettext;

export function NameDialog({ id, title, label, actionLabel, initial, onAction, onClose, children }) {
    const [name, setName] = useState(initial || '');
    const [busy, setBusy] = useState(false);
    const [fieldError, setFieldError] = useState(null);
    const [error, setError] = useState(null);

    const run = () => {
        setBusy(true);
        setError(null);
        setFieldError(null);
        Promise.resolve()
                .then(() => onAction(name.trim()))
                .then(() => {
                    setBusy(false);
                    onClose();
                })
                .catch(err => {
                    setBusy(false);
                    if (err?.name === ERROR_INVALID_ARGUMENT || err?.field)
                        setFieldError(err.message);
                    else
                        setError(err);
                });
    };

    return (
        <Modal id={id} variant={ModalVariant.small} isOpen onClose={onClose} title={title}
               actions={[
                   <Button key="run" variant="primary" className="mv-dialog-submit" isLoading={busy}
                           isDisabled={busy} onClick={run}>
                       {actionLabel}
                   </Button>,
                   <Button key="cancel" variant="link" onClick={onClose}>{_("Cancel")}</Button>,
               ]}>
            <Form onSubmit={e => { e.preventDefault(); run() }}>
                <ErrorAlert error={error} />
                <FormGroup label={label} fieldId={`${id}-name`} isRequired>
                    <TextInput id={`${id}-name`} value={name} autoFocus onChange={(_e, v) => setName(v)}
                               validated={fieldError ? 'error' : 'default'} />
                    {fieldError &&
                        <FormHelperText>
                            <HelperText>
                                <HelperTextItem variant="error" className="mv-field-error">{fieldError}</HelperTextItem>
                            </HelperText>
                        </FormHelperText>}
                </FormGroup>
                {children}
            </Form>
        </Modal>
    );
}
