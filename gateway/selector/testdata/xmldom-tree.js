// Reads a JSON array of texts on stdin and writes, for each, the tree that
// Mountebank's own DOM parser (@xmldom/xmldom, as mb's xpath.js calls it)
// makes of it, in the form xmldom_test.go renders its trees, as a JSON array.
// The first argument is the directory of the installed mountebank package.
// With --lines as the second, it reads one JSON text a line and answers
// each with its tree as one JSON line, until stdin closes.
'use strict';
const mb = process.argv[2];
const { DOMParser } = require(require.resolve('@xmldom/xmldom', { paths: [mb] }));

// As riftgate's strings hold no lone surrogate, compare texts that have
// none: String.prototype.toWellFormed makes each U+FFFD, as riftgate does.
const wf = s => (typeof s === 'string' && s.toWellFormed ? s.toWellFormed() : s);

function render (n, depth, out) {
    let line;
    switch (n.nodeType) {
    case 1: {
        const attrs = [];
        for (let i = 0; i < n.attributes.length; i++) {
            const a = n.attributes[i];
            attrs.push(JSON.stringify(wf(a.name)) + '=' + JSON.stringify(wf(a.value)) + ' ns=' + JSON.stringify(a.namespaceURI || ''));
        }
        line = 'element ' + JSON.stringify(wf(n.tagName)) + ' ns=' + JSON.stringify(n.namespaceURI || '') + (attrs.length ? ' ' + attrs.join(' ') : '');
        break;
    }
    case 3: line = 'text ' + JSON.stringify(wf(n.data)); break;
    case 4: line = 'cdata ' + JSON.stringify(wf(n.data)); break;
    case 7: line = 'pi ' + JSON.stringify(wf(n.target)) + ' ' + JSON.stringify(wf(n.data)); break;
    case 8: line = 'comment ' + JSON.stringify(wf(n.data)); break;
    case 9: line = 'document'; break;
    case 10: return; // a document type: no node of riftgate's tree
    default: line = 'type ' + n.nodeType;
    }
    out.push(' '.repeat(depth) + line);
    for (let c = n.firstChild; c; c = c.nextSibling) {
        render(c, depth + 1, out);
    }
}

function tree (text) {
    try {
        const out = [];
        render(new DOMParser({ errorHandler: (level, message) => {} }).parseFromString(text), 0, out);
        return out.join('\n');
    }
    catch (e) {
        return 'throws';
    }
}

if (process.argv[3] === '--lines') {
    const lines = require('readline').createInterface({ input: process.stdin });
    lines.on('line', line => process.stdout.write(JSON.stringify(tree(JSON.parse(line))) + '\n'));
}
else {
    const texts = JSON.parse(require('fs').readFileSync(0, 'utf8'));
    process.stdout.write(JSON.stringify(texts.map(tree)));
}
