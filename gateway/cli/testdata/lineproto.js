// A custom protocol for mb's --protofile, for tests: one line per
// connection, "VERB argument", answered with the reply field of the
// response the imposter gives. It follows mb's contract: the configuration
// is the last argument, the first line printed is the metadata, every
// request goes to the callback URL as {request} and comes back as
// {response}.
'use strict';
const net = require('net'),
    http = require('http'),
    config = JSON.parse(process.argv[process.argv.length - 1]);

function callback (port, request, done) {
    const url = config.callbackURLTemplate.replace(':port', port),
        req = http.request(url, { method: 'POST', headers: { 'Content-Type': 'application/json' } }, res => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', chunk => { body += chunk; });
            res.on('end', () => done(res.statusCode, body));
        });
    req.on('error', err => done(0, String(err)));
    req.end(JSON.stringify({ request }));
}

const server = net.createServer(socket => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', chunk => {
        text += chunk;
        if (text.indexOf('\n') < 0) {
            return;
        }
        const line = text.trim(),
            space = line.indexOf(' '),
            request = {
                verb: space < 0 ? line : line.slice(0, space),
                arg: space < 0 ? '' : line.slice(space + 1),
                size: line.length,
                tags: line.split(' ').slice(1)
            };
        callback(server.address().port, request, (status, body) => {
            let reply = 'ERROR ' + status;
            if (status === 200) {
                const response = JSON.parse(body).response || {};
                reply = response.reply || (config.defaultResponse && config.defaultResponse.reply) || 'NONE';
            }
            socket.end(reply + '\n');
        });
    });
});

server.listen(config.port || 0, '127.0.0.1', () => {
    console.log(JSON.stringify({ port: server.address().port, greeting: config.greeting }));
    console.log('info line protocol listening');
});
