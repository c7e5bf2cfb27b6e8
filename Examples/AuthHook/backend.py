# A sample authorization hook backend (README "Security model"): Python's standard library only.
# rtm serve --auth-hook http://127.0.0.1:8081/ --auth-hook-secret s3cret --auth-hook-connect fail-closed \
#           --namespace 'vip.*:hook-subscribe' --namespace 'chat.*:hook-publish'
import hashlib, hmac, json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

SECRET = b"s3cret"            # --auth-hook-secret
VIPS = {"alice"}              # who may enter vip.* channels
BANNED = {"mallory"}          # who may not log in at all

def decide(q):
    if q["event"] == "connect" and q["userId"] in BANNED:
        return {"result": "deny", "reason": "account suspended"}
    if q["event"] == "subscribe" and q["userId"] not in VIPS:
        return {"result": "deny", "reason": "VIP members only"}
    if q["event"] == "publish" and "darn" in q.get("payload", ""):
        return {"result": "allow", "payload": q["payload"].replace("darn", "d**n")}
    return {"result": "allow", "cacheSeconds": 60}

class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, self.headers.get("X-RTM-Signature", "")):
            return self.send_error(401)
        answer = json.dumps(decide(json.loads(body))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass

server = HTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8081), Hook)
print(server.server_address[1], flush=True)
server.serve_forever()
