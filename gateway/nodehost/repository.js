// riftgate's host for an mb --impostersRepository module on node. argv:
// module, options (JSON). stdin: one request a line, {id, op, ...}; fd 3:
// one answer a line, {id, result} or {id, error}. Requests run one at a
// time, in order.
'use strict';
const fs = require('fs'),
    readline = require('readline'),
    [name, optionsJSON] = process.argv.slice(1);

function answer (obj) {
    fs.writeSync(3, JSON.stringify(obj) + '\n');
}

// mb's logger as repositories use it: one method a level.
const logger = {};
['debug', 'info', 'warn', 'error'].forEach(level => {
    logger[level] = (...args) => console.error(`${level} ${args.join(' ')}`);
});

// An imposter as a repository holds it: its definition (creationRequest),
// port, and the functions mb's imposters have, which riftgate's engine
// answers for instead.
function imposterFrom (definition) {
    return {
        port: definition.port,
        protocol: definition.protocol,
        creationRequest: definition,
        stop: async () => {},
        toJSON: async () => definition,
        resetRequests: async () => {}
    };
}

function plain (imposter) {
    if (imposter === null || typeof imposter !== 'object') {
        return null;
    }
    return JSON.parse(JSON.stringify(imposter.creationRequest || imposter));
}

let repo;
const ops = {
    // loadAll hands the repository mb's protocols map: every protocol's
    // createImposterFrom collects the definition riftgate then starts.
    async loadAll () {
        const found = [],
            creator = { createImposterFrom: async definition => {
                found.push(JSON.parse(JSON.stringify(definition)));
                return imposterFrom(definition);
            } },
            protocols = new Proxy({}, { get: (target, key) => (typeof key === 'string' ? creator : undefined) });
        if (typeof repo.loadAll === 'function') {
            await repo.loadAll(protocols);
        }
        // A repository that keeps stubs apart (mb's filesystem one) hands
        // createImposterFrom references to them: the stubs are its
        // stubsFor(port)'s.
        for (const definition of found) {
            if (typeof repo.stubsFor === 'function' && (definition.stubs || []).some(stub => !stub.responses)) {
                definition.stubs = JSON.parse(JSON.stringify(await repo.stubsFor(definition.port).toJSON()));
            }
        }
        return found;
    },
    async add (msg) {
        await repo.add(imposterFrom(msg.imposter));
        return null;
    },
    async del (msg) {
        await repo.del(msg.port);
        return null;
    },
    async all () {
        return (await repo.all()).map(plain);
    }
};

try {
    repo = require(name).create(JSON.parse(optionsJSON), logger);
    if (!repo || typeof repo.add !== 'function' || typeof repo.del !== 'function') {
        throw new Error(`${name} does not create an imposters repository (add and del are required)`);
    }
    answer({ id: 0, result: null });
}
catch (e) {
    answer({ id: 0, error: String(e) });
    process.exit(1);
}

let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', line => {
    queue = queue.then(async () => {
        let msg = {};
        try {
            msg = JSON.parse(line);
            if (!ops[msg.op]) {
                throw new Error(`unknown operation ${msg.op}`);
            }
            const result = await ops[msg.op](msg);
            answer({ id: msg.id, result: result === undefined ? null : result });
        }
        catch (e) {
            answer({ id: msg.id, error: String(e) });
        }
    });
}).on('close', () => {
    queue.then(() => process.exit(0));
});
