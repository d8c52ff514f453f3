// The page: machines, networks, images, volumes and events as tabs, and a
// machine's own page; the location is Cockpit's (cockpit.location), so
// that the shell's address bar and history follow it.
import React from 'react';
import { Alert, Page, PageSection, Tab, TabTitleText, Tabs } from '@patternfly/react-core';

import cockpit from './cockpit.js';
import { errorMessage } from './errors.jsx';
import { EventsPage } from './events.jsx';
import { useLocationPath, useModel } from './hooks.js';
import { MachineList } from './machine-list.jsx';
import { MachinePage } from './machine-page.jsx';
import { ImagesPage, NetworksPage, VolumesPage } from './resources.jsx';
import { SuperuserAlert } from './superuser-dialog.jsx';

const _ = cockpit.gettext;

const SECTIONS = ['machines', 'networks', 'images', 'volumes', 'events'];

// Only this part of the frame follows the model: the rest is drawn again
// only when the location changes.
function ConnectionError() {
    const model = useModel();
    if (!model.error)
        return null;
    return (
        <Alert isInline variant="danger" id="mv-connection-error" title={_("microvmd cannot be reached")}>
            {errorMessage(model.error)}
        </Alert>
    );
}

export function App() {
    const path = useLocationPath();

    let body;
    if (path[0] === 'machine' && path[1]) {
        body = <MachinePage id={path[1]} tab={path[2]} />;
    } else {
        const active = SECTIONS.includes(path[0]) ? path[0] : 'machines';
        const select = (_event, key) => cockpit.location.go(key === 'machines' ? [] : [key]);
        body = (
            <PageSection>
                <Tabs activeKey={active} onSelect={select} mountOnEnter unmountOnExit id="mv-sections">
                    <Tab eventKey="machines" id="mv-tab-machines" title={<TabTitleText>{_("Machines")}</TabTitleText>}>
                        <MachineList />
                    </Tab>
                    <Tab eventKey="networks" id="mv-tab-networks" title={<TabTitleText>{_("Networks")}</TabTitleText>}>
                        <NetworksPage />
                    </Tab>
                    <Tab eventKey="images" id="mv-tab-images" title={<TabTitleText>{_("Images")}</TabTitleText>}>
                        <ImagesPage />
                    </Tab>
                    <Tab eventKey="volumes" id="mv-tab-volumes" title={<TabTitleText>{_("Volumes")}</TabTitleText>}>
                        <VolumesPage />
                    </Tab>
                    <Tab eventKey="events" id="mv-tab-events" title={<TabTitleText>{_("Events")}</TabTitleText>}>
                        <EventsPage />
                    </Tab>
                </Tabs>
            </PageSection>
        );
    }

    return (
        <Page id="mv-page" className="no-masthead-sidebar">
            <PageSection variant="light" padding={{ default: 'noPadding' }}>
                <SuperuserAlert />
                <ConnectionError />
            </PageSection>
            {body}
        </Page>
    );
}
