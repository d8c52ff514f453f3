// Cockpit's "administrative access" prompt, for a page that runs in
// limited access mode: the alert that says so, and the dialog that asks
// the bridge's superuser object to start a privileged bridge (sudo,
// answering its password prompt). The shell shows the same when it frames
// the page.
import React, { useEffect, useState } from 'react';
import {
    Alert, Button, Form, FormGroup, Modal, ModalVariant, TextInput,
} from '@patternfly/react-core';

import cockpit from './cockpit.js';
import { useSuperuser } from './hooks.js';
import { superuserBridges, superuserProxy } from './superuser.js';

const _ = cockpit.gettext;

function SuperuserDialog({ onClose }) {
    const [prompt, setPrompt] = useState(null);
    const [answer, setAnswer] = useState('');
    const [error, setError] = useState(null);
    const [busy, setBusy] = useState(false);

    useEffect(() => {
        const proxy = superuserProxy();
        const onPrompt = (event, message, text, def, echo, err) => {
            setPrompt({ message, text, echo });
            setAnswer(def || '');
            if (err)
                setError(err);
        };
        proxy.addEventListener('Prompt', onPrompt);
        const bridges = superuserBridges();
        if (bridges.length === 0) {
            setError(_("This system offers no way to gain administrative access here."));
            return () => proxy.removeEventListener('Prompt', onPrompt);
        }
        setBusy(true);
        proxy.Start(bridges[0])
                .then(() => onClose())
                .catch(err => {
                    setBusy(false);
                    if (err?.message !== 'cancelled')
                        setError(err?.message || String(err));
                });
        return () => {
            proxy.removeEventListener('Prompt', onPrompt);
        };
    }, []); // eslint-disable-line react-hooks/exhaustive-deps

    const send = () => {
        superuserProxy().Answer(answer);
        setPrompt(null);
        setAnswer('');
    };
    const cancel = () => {
        superuserProxy().Stop().catch(() => {});
        onClose();
    };

    return (
        <Modal variant={ModalVariant.small} isOpen onClose={cancel}
               title={_("Switch to administrative access")}
               actions={[
                   <Button key="auth" variant="primary" isDisabled={!prompt} onClick={send}>
                       {_("Authenticate")}
                   </Button>,
                   <Button key="cancel" variant="link" onClick={cancel}>{_("Cancel")}</Button>,
               ]}>
            {error && <Alert isInline variant="danger" title={error} />}
            {prompt
                ? <Form isHorizontal onSubmit={e => { e.preventDefault(); send() }}>
                    <p>{prompt.message || _("Please authenticate to gain administrative access")}</p>
                    <FormGroup label={prompt.text} fieldId="mv-superuser-answer">
                        <TextInput id="mv-superuser-answer" autoFocus value={answer}
                                   type={prompt.echo ? 'text' : 'password'}
                                   onChange={(_event, v) => setAnswer(v)} />
                    </FormGroup>
                </Form>
                : busy && <p>{_("Waiting for the system...")}</p>}
        </Modal>
    );
}

export function SuperuserButton() {
    const [open, setOpen] = useState(false);
    return (
        <>
            <Button variant="link" isInline className="mv-superuser-button" onClick={() => setOpen(true)}>
                {_("Turn on administrative access")}
            </Button>
            {open && <SuperuserDialog onClose={() => setOpen(false)} />}
        </>
    );
}

// Shown while the page runs in limited access mode.
export function SuperuserAlert() {
    const allowed = useSuperuser();
    if (allowed !== false)
        return null;
    return (
        <Alert isInline variant="warning" className="mv-limited-access"
               title={_("Web console is running in limited access mode.")}
               actionLinks={<SuperuserButton />}>
            {_("Actions run as your own user; microvmd asks polkit whether you may.")}
        </Alert>
    );
}
