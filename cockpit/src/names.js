// The names of microvmd's D-Bus API (introspection/*.xml) that the page
// uses.
export const BUS_NAME = 'org.microvmd1';
export const MANAGER_PATH = '/org/microvmd1';
export const MANAGER = 'org.microvmd1.Manager';
export const MACHINE = 'org.microvmd1.Machine';
export const SNAPSHOT = 'org.microvmd1.Snapshot';
export const NETWORK = 'org.microvmd1.Network';
export const IMAGE = 'org.microvmd1.Image';
export const VOLUME = 'org.microvmd1.Volume';
export const OBJECT_MANAGER = 'org.freedesktop.DBus.ObjectManager';
export const PROPERTIES = 'org.freedesktop.DBus.Properties';

export const ERROR_INVALID_ARGUMENT = 'org.microvmd1.Error.InvalidArgument';
export const ERROR_ACCESS_DENIED = 'org.freedesktop.DBus.Error.AccessDenied';
export const ERROR_AUTH_REQUIRED = 'org.freedesktop.DBus.Error.InteractiveAuthorizationRequired';

// The kinds of object the page keeps, by interface.
export const KINDS = {
    [MACHINE]: 'machines',
    [SNAPSHOT]: 'snapshots',
    [NETWORK]: 'networks',
    [IMAGE]: 'images',
    [VOLUME]: 'volumes',
};
