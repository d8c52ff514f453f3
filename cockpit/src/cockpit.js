// Cockpit's own cockpit.js, loaded by index.html from the bridge
// (../base1/cockpit.js); nothing of it is bundled.
const cockpit = window.cockpit;
export default cockpit;
