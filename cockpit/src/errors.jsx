// Errors as the daemon gave them, and what to do about a refusal.
import React from 'react';
import { Alert, AlertActionCloseButton } from '@patternfly/react-core';

import cockpit from './cockpit.js';
import { ERROR_ACCESS_DENIED, ERROR_AUTH_REQUIRED } from './names.js';
import { useSuperuser } from './hooks.js';
import { SuperuserButton } from './superuser-dialog.jsx';

const _ = cockpit.gettext;

export function isAccessDenied(error) {
    return error && (error.name === ERROR_ACCESS_DENIED || error.name === ERROR_AUTH_REQUIRED ||
                     error.problem === 'access-denied');
}

// The message of an error from a call: the daemon's own text.
export function errorMessage(error) {
    if (!error)
        return '';
    return error.message || error.problem || String(error);
}

export function ErrorAlert({ error, title, onClose }) {
    const allowed = useSuperuser();
    if (!error)
        return null;
    const denied = isAccessDenied(error);
    return (
        <Alert isInline variant="danger" className="mv-error"
               title={denied ? _("Not permitted to perform this action.") : (title || _("The action failed"))}
               actionClose={onClose && <AlertActionCloseButton onClose={onClose} />}
               actionLinks={denied && allowed === false ? <SuperuserButton /> : null}>
            <p className="mv-error-message">{errorMessage(error)}</p>
            {denied && allowed === false &&
                <p>{_("This web console is running in limited access mode: administrative access may allow it.")}</p>}
        </Alert>
    );
}
