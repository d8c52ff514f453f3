// CPU and memory of a running machine, from Machine.GetStats every two
// seconds while its page shows them, drawn as small line charts.
import React, { useRef, useState } from 'react';
import { Card, CardBody, CardTitle, Flex, FlexItem } from '@patternfly/react-core';

import cockpit from './cockpit.js';
import { call } from './client.js';
import { cpuPercent, formatBytes, formatPercent } from './format.js';
import { useInterval } from './hooks.js';
import { MACHINE } from './names.js';

const _ = cockpit.gettext;
const INTERVAL_MS = 2000;
const SAMPLES = 60;

function LineChart({ values, max, label, id }) {
    const width = 300;
    const height = 80;
    const top = Math.max(max || 0, ...values.filter(v => v !== null), 1);
    const step = width / (SAMPLES - 1);
    const offset = SAMPLES - values.length;
    const points = values
            .map((v, i) => v === null ? null : `${((offset + i) * step).toFixed(1)},${(height - (v / top) * height).toFixed(1)}`)
            .filter(Boolean)
            .join(' ');
    return (
        <svg className="mv-chart" id={id} viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none"
             role="img" aria-label={label}>
            <rect x="0" y="0" width={width} height={height} className="mv-chart-bg" />
            <polyline points={points} className="mv-chart-line" />
        </svg>
    );
}

export function UsageCharts({ machine }) {
    const last = useRef(null);
    const [cpu, setCpu] = useState([]);
    const [memory, setMemory] = useState([]);
    const [error, setError] = useState(null);

    useInterval(() => {
        call(machine.path, MACHINE, 'GetStats', '', [])
                .then(([raw]) => {
                    const stats = {};
                    for (const [k, v] of Object.entries(raw))
                        stats[k] = v.v;
                    const p = cpuPercent(last.current, stats);
                    last.current = stats;
                    setError(null);
                    setCpu(values => [...values, p].slice(-SAMPLES));
                    setMemory(values => [...values, Number(stats.resident_memory_bytes || 0)].slice(-SAMPLES));
                })
                .catch(err => setError(err));
    }, INTERVAL_MS, [machine.path]);

    const lastCpu = cpu.length ? cpu[cpu.length - 1] : null;
    const lastMemory = memory.length ? memory[memory.length - 1] : null;
    return (
        <Flex>
            <FlexItem>
                <Card isCompact className="mv-usage-card">
                    <CardTitle>{_("CPU")} <span id="mv-cpu-now">{formatPercent(lastCpu)}</span></CardTitle>
                    <CardBody><LineChart id="mv-cpu-chart" values={cpu} max={100} label={_("CPU use")} /></CardBody>
                </Card>
            </FlexItem>
            <FlexItem>
                <Card isCompact className="mv-usage-card">
                    <CardTitle>
                        {_("Memory")} <span id="mv-memory-now">{lastMemory !== null ? formatBytes(lastMemory) : ''}</span>
                    </CardTitle>
                    <CardBody>
                        <LineChart id="mv-memory-chart" values={memory} max={Number(machine.MemoryBytes)}
                                   label={_("Resident memory")} />
                    </CardBody>
                </Card>
            </FlexItem>
            {error && <FlexItem><p className="mv-usage-error">{error.message}</p></FlexItem>}
        </Flex>
    );
}
