// A custom protocol for mb's --protofile, for tests: one line per
// connection, "VERB argument", answered with the reply field of the
// response the imposter gives. It follows mb's contract: the configuration
// is the last argument, the first line printed is the metadata, every
// request goes to the callback URL as {request} and comes back as
// {response}, or as {proxy, request, callbackURL}: the process then
// proxies itself (proxyTo).
'use strict';
const net = require('net'),
    http = require('http'),
    config = JSON.parse(process.argv[process.argv.length - 1]);

function postJSON (url, what, done) {
    const req = http.request(url, { method: 'POST', headers: { 'Content-Type': 'application/json' } }, res => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', chunk => { body += chunk; });
        res.on('end', () => done(res.statusCode, body));
    });
    req.on('error', err => done(0, String(err)));
    req.end(JSON.stringify(what));
}

function callback (port, request, done) {
    postJSON(config.callbackURLTemplate.replace(':port', port), { request }, done);
}

// proxyTo sends the request's line to proxy.to ("host:port", a line
// server) and hands its reply back as {reply}, as mb's contract has a
// protocol proxy: the answer goes to callbackURL as {proxyResponse}, and
// what comes back is the response.
function proxyTo (answer, done) {
    const [host, port] = String(answer.proxy.to).split(':'),
        request = answer.request,
        upstream = net.connect(Number(port), host, () => {
            upstream.write(request.verb + (request.arg ? ' ' + request.arg : '') + '\n');
        });
    let text = '';
    upstream.setEncoding('utf8');
    upstream.on('data', chunk => { text += chunk; });
    upstream.on('error', err => done(0, String(err)));
    upstream.on('end', () => {
        postJSON(answer.callbackURL, { proxyResponse: { reply: text.trim() } }, (status, body) => {
            if (status !== 200) {
                return done(status, body);
            }
            done(status, JSON.stringify({ response: JSON.parse(body) }));
        });
    });
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
            if (status === 200 && JSON.parse(body).proxy) {
                return proxyTo(JSON.parse(body), answer);
            }
            answer(status, body);
        });

        function answer (status, body) {
            let reply = 'ERROR ' + status;
            try {
                reply += ' ' + JSON.parse(body).errors[0].code;
            }
            catch (e) { /* not mb's error body */ }
            if (status === 200) {
                const response = JSON.parse(body).response || {};
                reply = response.reply || (response.fault && 'FAULT ' + JSON.stringify(response)) || (config.defaultResponse && config.defaultResponse.reply) || 'NONE';
            }
            socket.end(reply + '\n');
        }
    });
});

server.listen(config.port || 0, '127.0.0.1', () => {
    console.log(JSON.stringify({ port: server.address().port, greeting: config.greeting }));
    console.log('info line protocol listening');
});
