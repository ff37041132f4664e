#!/usr/bin/env python3
"""A tiny Docker registry token server for tests, on 127.0.0.1 over TLS.

Usage: token_server.py PORT TLS_CERT TLS_KEY SIGN_CERT SIGN_KEY USER PASSWORD SERVICE ISSUER

GET /token?service=...&scope=repository:NAME:ACTIONS (any number of scopes) with
basic credentials USER:PASSWORD answers {"token": JWT}; the JWT is RS256-signed with
SIGN_KEY (via the openssl command) and carries SIGN_CERT in its x5c header, which the
registry checks against its rootcertbundle. Wrong or missing credentials get 401.
"""
import base64
import json
import ssl
import subprocess
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

port, tls_cert, tls_key, sign_cert, sign_key, user, password, service, issuer = sys.argv[1:10]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


with open(sign_cert) as f:
    pem = f.read()
der_b64 = "".join(l for l in pem.splitlines() if "CERTIFICATE" not in l)


def make_token(access):
    now = int(time.time())
    header = {"typ": "JWT", "alg": "RS256", "x5c": [der_b64]}
    claims = {"iss": issuer, "sub": user, "aud": service, "exp": now + 600, "nbf": now - 10, "iat": now,
              "jti": str(now) + str(id(access)), "access": access}
    signing_input = (b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())).encode()
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", sign_key], input=signing_input,
                         capture_output=True, check=True).stdout
    return signing_input.decode() + "." + b64url(sig)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        if self.headers.get("Authorization") != want:
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}')
            return
        access = []
        for scope in q.get("scope", []):
            parts = scope.split(":")
            if len(parts) >= 3 and parts[0] == "repository":
                access.append({"type": "repository", "name": ":".join(parts[1:-1]),
                               "actions": parts[-1].split(",")})
        token = make_token(access)
        body = json.dumps({"token": token, "access_token": token, "expires_in": 600}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("token-server: " + fmt % args + "\n")


server = HTTPServer(("127.0.0.1", int(port)), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(tls_cert, tls_key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
