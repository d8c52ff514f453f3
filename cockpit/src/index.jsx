import React from 'react';
import { createRoot } from 'react-dom/client';

import '@patternfly/react-core/dist/styles/base.css';
import './page.css';

import cockpit from './cockpit.js';
import { App } from './app.jsx';
import { start } from './client.js';
import { startEvents } from './events.jsx';

document.addEventListener('DOMContentLoaded', () => {
    cockpit.translate();
    start();
    startEvents();
    createRoot(document.getElementById('app')).render(<App />);
});
