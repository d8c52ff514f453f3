// The create dialog's form and the spec document it becomes, and the
// daemon's InvalidArgument messages taken back to the field they name.

const MiB = 1024 * 1024;

export const EMPTY_FORM = Object.freeze({
    name: '',
    hypervisor_type: '',
    image: '',
    kernel: '',
    initrd: '',
    kernel_args: '',
    cpu_millicores: '1000',
    memory_mib: '256',
    disk_mib: '',
    network_name: '',
    labels: '',
    start: false,
});

// The form's fields by the spec fields they fill: an error naming one of
// these is shown on that field.
const FIELD_OF_SPEC = {
    name: 'name',
    hypervisor_type: 'hypervisor_type',
    hypervisor_version: 'hypervisor_type',
    image: 'image',
    kernel: 'kernel',
    initrd: 'initrd',
    kernel_args: 'kernel_args',
    cpu_millicores: 'cpu_millicores',
    max_vcpus: 'cpu_millicores',
    memory_bytes: 'memory_mib',
    max_memory_bytes: 'memory_mib',
    disk_bytes: 'disk_mib',
    network_name: 'network_name',
    labels: 'labels',
};

// "a=b, c=d" or one per line.
export function parseLabels(text) {
    const labels = {};
    for (const part of (text || '').split(/[\n,]/)) {
        const item = part.trim();
        if (!item)
            continue;
        const at = item.indexOf('=');
        if (at <= 0)
            throw new FormError('labels', `labels: "${item}" is not KEY=VALUE`);
        labels[item.slice(0, at).trim()] = item.slice(at + 1).trim();
    }
    return labels;
}

export class FormError extends Error {
    constructor(field, message) {
        super(message);
        this.field = field;
    }
}

// A whole number from a text field; the daemon checks the range, so that
// its own message is the one shown.
function number(field, text) {
    const t = String(text ?? '').trim();
    if (!/^\d+$/.test(t))
        throw new FormError(field, `${field}: "${t}" is not a whole number`);
    return Number(t);
}

// The spec document (JSON text) for a filled-in form. Empty optional
// fields are left out so that the daemon's defaults apply.
export function buildSpec(form) {
    const spec = { name: form.name.trim() };
    if (form.hypervisor_type)
        spec.hypervisor_type = form.hypervisor_type;
    if (form.image.trim())
        spec.image = form.image.trim();
    if (form.kernel.trim())
        spec.kernel = form.kernel.trim();
    if (form.initrd.trim())
        spec.initrd = form.initrd.trim();
    if (form.kernel_args.trim())
        spec.kernel_args = form.kernel_args.trim();
    spec.cpu_millicores = number('cpu_millicores', form.cpu_millicores);
    spec.memory_bytes = number('memory_mib', form.memory_mib) * MiB;
    if (String(form.disk_mib).trim())
        spec.disk_bytes = number('disk_mib', form.disk_mib) * MiB;
    if (form.network_name)
        spec.network_name = form.network_name;
    const labels = parseLabels(form.labels);
    if (Object.keys(labels).length)
        spec.labels = labels;
    return JSON.stringify(spec);
}

// The spec field an InvalidArgument message names first ("cpu_millicores:
// 50 is outside ...", "disks[0].path: ...", "labels.tier: ..."), or null.
export function specFieldOfMessage(message) {
    const m = String(message || '').match(/^([a-z_][a-z0-9_]*)(?:[[.][^:\s]*)?:\s/);
    return m ? m[1] : null;
}

// The form field to show a daemon's InvalidArgument on, or null for the
// dialog as a whole.
export function formFieldOfMessage(message) {
    const field = specFieldOfMessage(message);
    return field ? (FIELD_OF_SPEC[field] || null) : null;
}
