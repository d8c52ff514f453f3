// A confirmation for what cannot be undone.
import React, { useState } from 'react';
import { Button, Modal, ModalVariant } from '@patternfly/react-core';

import cockpit from './cockpit.js';

const _ = cockpit.gettext;

export function ConfirmDialog({ title, body, confirmLabel, onConfirm, onClose, children }) {
    const [busy, setBusy] = useState(false);
    const confirm = () => {
        setBusy(true);
        Promise.resolve(onConfirm()).finally(() => {
            setBusy(false);
            onClose();
        });
    };
    return (
        <Modal variant={ModalVariant.small} isOpen onClose={onClose} title={title} titleIconVariant="warning"
               className="mv-confirm"
               actions={[
                   <Button key="confirm" variant="danger" className="mv-confirm-button" isLoading={busy}
                           isDisabled={busy} onClick={confirm}>
                       {confirmLabel}
                   </Button>,
                   <Button key="cancel" variant="link" onClick={onClose}>{_("Cancel")}</Button>,
               ]}>
            {body}
            {children}
        </Modal>
    );
}
