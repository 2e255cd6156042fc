# A renter's web server for the browser test (e2e/browser_test.go): a
# page, a server-sent event stream that sends "one" and holds the rest
# until /release is fetched (a buffering proxy never shows "one"), and a
# WebSocket endpoint echoing one text message (RFC 6455, by hand: the
# allocation has nothing but python3's standard library).
import base64
import hashlib
import http.server
import socketserver
import sys
import threading

release = threading.Event()
PAGE = b'<!doctype html><title>renter</title><p id="p">renter-page</p>'
WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def reply(self, body, kind='text/html'):
        self.send_response(200)
        self.send_header('Content-Type', kind)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == '/events':
            self.send_response(200)
            self.send_header('Content-Type', 'text/event-stream')
            self.send_header('Cache-Control', 'no-cache')
            self.end_headers()
            self.wfile.write(b'data: one\n\n')
            self.wfile.flush()
            release.wait(300)
            self.wfile.write(b'data: two\n\n')
            self.wfile.flush()
            self.close_connection = True
        elif self.path == '/release':
            release.set()
            self.reply(b'released', 'text/plain')
        elif self.path == '/ws':
            self.websocket()
        else:
            self.reply(PAGE)

    def websocket(self):
        key = self.headers.get('Sec-WebSocket-Key', '')
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header('Upgrade', 'websocket')
        self.send_header('Connection', 'Upgrade')
        self.send_header('Sec-WebSocket-Accept', accept)
        self.end_headers()
        self.wfile.flush()
        head = self.rfile.read(2)
        n = head[1] & 0x7F
        if n == 126:
            n = int.from_bytes(self.rfile.read(2), 'big')
        mask = self.rfile.read(4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
        reply = b'echo:' + data
        self.wfile.write(bytes([0x81, len(reply)]) + reply)
        self.wfile.flush()
        self.close_connection = True


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


Server(('127.0.0.1', int(sys.argv[1])), Handler).serve_forever()
