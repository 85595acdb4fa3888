/**
 * Reads the mail the server writes to `$DATA_DIR/mail/*.eml` when no SMTP server is
 * configured. A small MIME reader: unfolded headers, nested multipart bodies, and the
 * base64 and quoted-printable transfer encodings, decoded as UTF-8.
 */
import { promises as fs } from "node:fs";
import * as path from "node:path";

/**
 * A decoded message: the file it came from, its raw `To` and `Subject` header values
 * (RFC 2047 encoded words left as they are; the address itself is always plain), and the
 * decoded text of all its text parts.
 */
export interface Mail {
  file: string;
  to: string;
  subject: string;
  text: string;
}

/** The repository root: this file lives in `end2end/tests/`. */
const repoRoot = path.resolve(__dirname, "..", "..");

/**
 * The server's mail outbox: `$DATA_DIR/mail`, with a relative DATA_DIR taken from the
 * repository root (the server's working directory), and `data` when DATA_DIR is unset.
 */
export function mailDir(): string {
  return path.join(path.resolve(repoRoot, process.env.DATA_DIR ?? "data"), "mail");
}

/** Splits a MIME entity (a latin1 string, one char per byte) into headers and body. */
function parseEntity(raw: string): { headers: Map<string, string>; body: string } {
  const blank = /\r?\n\r?\n/.exec(raw);
  const head = blank ? raw.slice(0, blank.index) : raw;
  const body = blank ? raw.slice(blank.index + blank[0].length) : "";
  const headers = new Map<string, string>();
  for (const line of head.replace(/\r?\n[ \t]+/g, " ").split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon > 0) {
      headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
  }
  return { headers, body };
}

/** Decodes a body by its Content-Transfer-Encoding into a UTF-8 string. */
function decodeBody(body: string, encoding: string): string {
  switch (encoding.toLowerCase()) {
    case "base64":
      return Buffer.from(body.replace(/\s+/g, ""), "base64").toString("utf8");
    case "quoted-printable": {
      const bytes = body
        .replace(/=\r?\n/g, "")
        .replace(/=([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
      return Buffer.from(bytes, "latin1").toString("utf8");
    }
    default:
      return Buffer.from(body, "latin1").toString("utf8");
  }
}

/** Every text part of an entity, decoded, depth first. */
function textParts(raw: string): string[] {
  const { headers, body } = parseEntity(raw);
  const contentType = headers.get("content-type") ?? "text/plain";
  if (/^multipart\//i.test(contentType)) {
    const boundary = /boundary="?([^";]+)"?/i.exec(contentType)?.[1];
    if (!boundary) return [];
    const delimiter = `--${boundary}`;
    return body
      .split(delimiter)
      .slice(1)
      .filter((part) => !part.startsWith("--"))
      .flatMap((part) => textParts(part.replace(/^\r?\n/, "")));
  }
  if (!/^text\//i.test(contentType)) return [];
  return [decodeBody(body, headers.get("content-transfer-encoding") ?? "7bit")];
}

/** Reads and decodes one `.eml` file. */
export async function readMail(file: string): Promise<Mail> {
  const raw = (await fs.readFile(file)).toString("latin1");
  const { headers } = parseEntity(raw);
  return {
    file,
    to: headers.get("to") ?? "",
    subject: headers.get("subject") ?? "",
    text: textParts(raw).join("\n"),
  };
}

/**
 * Waits until a message addressed to `email` whose text matches `pattern` is in the
 * outbox and returns the newest such message.
 */
export async function waitForMail(email: string, pattern: RegExp, timeoutMs = 20_000): Promise<Mail> {
  const dir = mailDir();
  const deadline = Date.now() + timeoutMs;
  const wanted = email.toLowerCase();
  for (;;) {
    const names = await fs.readdir(dir).catch(() => [] as string[]);
    const candidates: { mail: Mail; mtime: number }[] = [];
    for (const name of names.filter((n) => n.endsWith(".eml"))) {
      const file = path.join(dir, name);
      const raw = (await fs.readFile(file)).toString("latin1");
      if (!raw.toLowerCase().includes(wanted)) continue;
      const mail = await readMail(file);
      if (mail.to.toLowerCase().includes(wanted) && pattern.test(mail.text)) {
        candidates.push({ mail, mtime: (await fs.stat(file)).mtimeMs });
      }
    }
    if (candidates.length > 0) {
      candidates.sort((a, b) => b.mtime - a.mtime);
      return candidates[0].mail;
    }
    if (Date.now() > deadline) {
      throw new Error(`no mail to ${email} matching ${pattern} in ${dir} after ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
