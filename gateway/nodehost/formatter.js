// riftgate's host for an mb --formatter module on node. argv: fn, module;
// stdin: the JSON array of arguments; fd 3: the answer.
'use strict';
const fs = require('fs');
const [fn, name] = process.argv.slice(1);
function answer (obj) {
    fs.writeSync(3, JSON.stringify(obj));
    fs.closeSync(3);
}
Promise.resolve().then(() => {
    const args = JSON.parse(fs.readFileSync(0, 'utf8'));
    const mod = require(name);
    if (typeof mod[fn] !== 'function') {
        throw new Error(`formatter.${fn} is not a function`);
    }
    return mod[fn](...args);
}).then(result => {
    answer({ result: result === undefined ? null : result });
}, err => {
    answer({ error: String(err) });
    process.exitCode = 1;
});
