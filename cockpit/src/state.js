// Machine states and what may be asked of a machine in each.
import cockpit from './cockpit.js';

const _ = cockpit.gettext;

export const STATE_LABELS = {
    Stopped: _("Stopped"),
    Starting: _("Starting"),
    Running: _("Running"),
    Paused: _("Paused"),
    Standby: _("Standby"),
    Stopping: _("Stopping"),
    Restarting: _("Restarting"),
    Failed: _("Failed"),
};

export function stateLabel(state) {
    return STATE_LABELS[state] || state || '';
}

export function stateColor(state) {
    switch (state) {
    case 'Running': return 'green';
    case 'Paused': case 'Standby': return 'blue';
    case 'Starting': case 'Stopping': case 'Restarting': return 'orange';
    case 'Failed': return 'red';
    default: return 'grey';
    }
}

// Whether the machine's VMM runs, so that stats and the console exist.
export function hasVmm(state) {
    return ['Starting', 'Running', 'Paused', 'Stopping'].includes(state);
}

// The actions of the machine page, in order; `destructive` ones are
// confirmed first.
export const ACTIONS = [
    { method: 'Start', label: _("Start"), when: ['Stopped', 'Failed', 'Standby'] },
    { method: 'Stop', label: _("Stop"), when: ['Running', 'Paused', 'Starting', 'Standby', 'Restarting', 'Failed'], destructive: true },
    { method: 'Pause', label: _("Pause"), when: ['Running'] },
    { method: 'Resume', label: _("Resume"), when: ['Paused'] },
    { method: 'Restart', label: _("Restart"), when: ['Running', 'Paused', 'Failed'], destructive: true },
    { method: 'Standby', label: _("Standby"), when: ['Running'] },
];

export function actionAllowed(action, state) {
    return action.when.includes(state);
}
