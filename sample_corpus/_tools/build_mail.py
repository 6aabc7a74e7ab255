"""Generate the e-mail documents of sample_corpus/ (.eml files and one .mbox thread).

Uses only the standard library, plus fpdf2 for the one PDF attachment:

    .venv/bin/python sample_corpus/_tools/build_mail.py

Message-IDs are fixed so the eval fixture can refer to mbox messages as
``support/account/lost-2fa-device-thread.mbox#<message-id without angle brackets>``.
"""
from __future__ import annotations

import mailbox
from email.message import EmailMessage
from email.utils import format_datetime
import datetime as dt
from pathlib import Path

from fpdf import FPDF

ROOT = Path(__file__).resolve().parents[1]


def when(s: str) -> str:
    return format_datetime(dt.datetime.fromisoformat(s))


def base(frm, to, subject, date, msgid, **extra) -> EmailMessage:
    m = EmailMessage()
    m["From"] = frm
    m["To"] = to
    m["Subject"] = subject
    m["Date"] = when(date)
    m["Message-ID"] = f"<{msgid}>"
    for k, v in extra.items():
        m[k.replace("_", "-")] = v
    return m


def write(path: Path, msg: EmailMessage):
    if msg.is_multipart():  # fixed boundary: regenerating gives byte-identical files
        msg.set_boundary("=_lumen_" + path.stem)
    path.write_bytes(bytes(msg))
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


# --------------------------------------------------------------------------- billing

WIRE_BODY = """\
Hello Northwind Logistics accounts payable team,

Thank you for renewing your Lumen Cloud Enterprise agreement. Invoice INV-2024-00817 for the
annual term starting 1 December 2024 is now available in Settings > Billing > Invoices.

  Invoice:   INV-2024-00817
  Amount:    USD 48,000.00 (tax exempt, certificate on file)
  Issued:    16 October 2024
  Due date:  15 November 2024 (net 30)

As requested, you can pay this invoice by wire transfer. The bank details are in the attached
file wire-transfer-instructions.txt. Please read the notes in that file before sending the
payment - in particular, the invoice number must be the payment reference, otherwise we cannot
match the payment automatically and it can take up to two weeks to allocate it by hand.

If your procurement system needs a W-9 or a supplier form, reply to this email and we will send it.

Kind regards,
Helena Brandt
Billing Operations, Lumen Cloud Inc.
billing@lumencloud.example
"""

WIRE_ATTACHMENT = """\
LUMEN CLOUD INC. - WIRE TRANSFER INSTRUCTIONS
Valid for invoices in USD. Issued 2024-10-16.

Beneficiary name:     Lumen Cloud Inc.
Beneficiary address:  400 Harbor Street, Suite 1200, Boston, MA 02110, USA
Bank name:            Harbor Trust Bank, N.A.
Bank address:         1 Federal Plaza, Boston, MA 02110, USA
Account number:       0098 7654 3210
ABA routing number:   011000999  (domestic wires)
SWIFT / BIC:          HTBKUS3BXXX  (international wires)

PAYMENT REFERENCE:    the invoice number, e.g. INV-2024-00817
                      One invoice per wire. Do not combine several invoices in one payment.

Notes
1. All bank charges are paid by the sender (charge code OUR for international wires).
   Short payments caused by intermediary bank fees remain open on the invoice.
2. Send the remittance advice to ar@lumencloud.example on the day of payment.
3. Lumen Cloud will NEVER change its bank details by email. If you receive a message
   asking you to pay to a different account, do not pay; call your account manager
   on a number you already know to confirm.
4. Payments are usually matched within 2 business days after they arrive.
"""

RENEWAL_TEXT = """\
Hi Ana,

Your Lumen Cloud Team plan for the workspace "Brightpath Analytics" renews in 30 days.

  Renewal date:   1 December 2024
  Plan:           Team, billed annually
  Seats:          24 x USD 490.00
  Total:          USD 11,760.00 plus applicable tax
  Payment method: Visa ending in 4242

You don't need to do anything: we will charge the card on the renewal date and email the
invoice to your billing contacts.

Want to change something? Seat reductions and plan changes made before 1 December apply to the
new term. Seats removed after the renewal are still billed until the following renewal.

Manage your subscription: https://app.lumencloud.example/settings/billing/plan

The Lumen Cloud team
"""

RENEWAL_HTML = """\
<html><body style="font-family:Arial,sans-serif">
<p>Hi Ana,</p>
<p>Your Lumen Cloud <strong>Team</strong> plan for the workspace <em>Brightpath Analytics</em> renews in <strong>30 days</strong>.</p>
<table cellpadding="4" style="border-collapse:collapse">
<tr><td>Renewal date</td><td><strong>1 December 2024</strong></td></tr>
<tr><td>Plan</td><td>Team, billed annually</td></tr>
<tr><td>Seats</td><td>24 &times; USD 490.00</td></tr>
<tr><td>Total</td><td>USD 11,760.00 plus applicable tax</td></tr>
<tr><td>Payment method</td><td>Visa ending in 4242</td></tr>
</table>
<p>You don't need to do anything: we will charge the card on the renewal date and email the invoice to your billing contacts.</p>
<p>Want to change something? Seat reductions and plan changes made before 1 December apply to the new term. Seats removed after the renewal are still billed until the following renewal.</p>
<p><a href="https://app.lumencloud.example/settings/billing/plan">Manage your subscription</a></p>
<p>The Lumen Cloud team</p>
<p style="font-size:11px;color:#888">Lumen Cloud Inc., 400 Harbor Street, Boston, MA. You receive this email because you are a billing contact of this workspace.</p>
</body></html>
"""

# --------------------------------------------------------------------------- account

SIGNIN_TEXT = """\
Hi Marcus,

We noticed a new sign-in to your Lumen Cloud account (marcus.webb@brightpath.example).

  When:     14 October 2024, 21:37 UTC
  Device:   Chrome 129 on Windows 11
  Location: Lisbon, Portugal (approximate, based on IP address 192.0.2.41)

If this was you, you can ignore this email.

If this wasn't you:
  1. Reset your password now: https://app.lumencloud.example/login/forgot
  2. Sign out of all other sessions under Profile > Security > Sessions.
  3. Turn on two-factor authentication if you haven't already.

We send this alert the first time you sign in from a new browser or device. It cannot be
turned off, because it protects your account.

Lumen Cloud Security
"""

SIGNIN_HTML = """\
<html><body style="font-family:Arial,sans-serif">
<h2>New sign-in to your Lumen Cloud account</h2>
<p>Hi Marcus, we noticed a new sign-in to your account (marcus.webb@brightpath.example).</p>
<ul>
<li><strong>When:</strong> 14 October 2024, 21:37 UTC</li>
<li><strong>Device:</strong> Chrome 129 on Windows 11</li>
<li><strong>Location:</strong> Lisbon, Portugal (approximate, based on IP address 192.0.2.41)</li>
</ul>
<p>If this was you, you can ignore this email.</p>
<p><strong>If this wasn't you:</strong></p>
<ol>
<li><a href="https://app.lumencloud.example/login/forgot">Reset your password now</a>.</li>
<li>Sign out of all other sessions under Profile &rsaquo; Security &rsaquo; Sessions.</li>
<li>Turn on two-factor authentication if you haven't already.</li>
</ol>
<p>We send this alert the first time you sign in from a new browser or device. It cannot be turned off, because it protects your account.</p>
<p>Lumen Cloud Security</p>
</body></html>
"""

EXPORT_TEXT = """\
Hi Ana,

The copy of your personal account data that you requested on 3 November 2024 is ready.

  Request ID:  DSR-2024-11873
  Download:    https://app.lumencloud.example/privacy/exports/DSR-2024-11873
  Available:   until 10 November 2024 (7 days)

You need to sign in to download the file. The attached receipt lists what the archive contains
and the checksum you can use to verify the download.

This export contains data about you as a Lumen Cloud user. It does not contain the business
data of your workspaces; workspace Owners can export that with the data export tools.

Lumen Cloud Privacy Team
privacy@lumencloud.example
"""


def export_receipt_pdf() -> bytes:
    pdf = FPDF(format="A4")
    pdf.set_title("Personal data export receipt DSR-2024-11873")
    pdf.set_author("Lumen Cloud Privacy Team")
    pdf.set_creation_date(dt.datetime(2024, 11, 3, 9, 12, tzinfo=dt.timezone.utc))
    pdf.add_page()
    pdf.set_margins(20, 20, 20)
    pdf.set_font("Helvetica", "B", 16)
    pdf.multi_cell(0, 9, "Personal data export receipt", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 10.5)
    lines = [
        "Request ID: DSR-2024-11873",
        "Requested by: ana.silva@brightpath.example on 2024-11-03",
        "Legal basis: Article 15 and Article 20 GDPR (access and portability)",
        "Archive: lumen-account-export-DSR-2024-11873.zip (2.4 MB)",
        "SHA-256: 9b1f0c3e6a7d52e48f21c0a9b7d4e6f1a3c5e7d9b1f3a5c7e9d1b3f5a7c9e1d3",
        "",
        "Files in the archive:",
        "- profile.json: name, email, time zone, language, created date",
        "- memberships.json: workspaces and roles, with join dates",
        "- sign-in-history.json: sign-ins of the last 12 months with IP address and device",
        "- notifications.json: email and Slack notification settings",
        "- support-conversations.json: support tickets and chat transcripts",
        "",
        "Not included: workspace business data, invoices (download them from the billing page),",
        "and security logs kept for fraud prevention.",
        "",
        "Questions: privacy@lumencloud.example. Data protection officer: dpo@lumencloud.example.",
    ]
    for line in lines:
        pdf.multi_cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


# --------------------------------------------------------------------------- mbox thread

THREAD = [
    dict(
        frm="Ana Silva <ana.silva@brightpath.example>", to="Lumen Cloud Support <support@lumencloud.example>",
        subject="Lost my phone - can't get past two-factor login", date="2024-10-21T08:02:00+00:00",
        msgid="CAKx7Lq2-lost2fa-01@mail.brightpath.example", refs=[],
        body="""\
Hello,

My phone was stolen over the weekend and with it my authenticator app. I can enter my password
but Lumen asks for the 6-digit code, which I no longer have. I did not save the backup codes.

I am the only Owner of our workspace (Brightpath Analytics), so there is no one who can reset it
for me. Our morning reports are still going out, but I need to get in to change a connector today.

Can you remove the two-factor authentication from my account?

Thanks,
Ana Silva
Head of Data, Brightpath
""",
    ),
    dict(
        frm="Kenji Sato (Lumen Cloud Support) <support@lumencloud.example>", to="Ana Silva <ana.silva@brightpath.example>",
        subject="Re: Lost my phone - can't get past two-factor login [T-58213]", date="2024-10-21T09:15:00+00:00",
        msgid="T-58213.1.support@lumencloud.example", refs=["CAKx7Lq2-lost2fa-01@mail.brightpath.example"],
        body="""\
Hi Ana,

Sorry to hear about your phone. We can help, but because removing two-factor authentication
gives full access to the account, we first need to confirm it is really you. As you are the only
Owner, nobody in your workspace can do this for you.

Please reply to this email (from the same address) with:

  1. The last four digits of the card on file for the workspace, or the number of your most
     recent invoice (it starts with INV-).
  2. The approximate date and city of your last successful sign-in.
  3. The name of one dashboard in the workspace.

Once we have verified these details we remove 2FA, normally within one business day. We will
never ask for your password.

Best,
Kenji Sato
Lumen Cloud Support - ticket T-58213
""",
    ),
    dict(
        frm="Ana Silva <ana.silva@brightpath.example>", to="Kenji Sato (Lumen Cloud Support) <support@lumencloud.example>",
        subject="Re: Lost my phone - can't get past two-factor login [T-58213]", date="2024-10-21T10:47:00+00:00",
        msgid="CAKx7Lq2-lost2fa-02@mail.brightpath.example",
        refs=["CAKx7Lq2-lost2fa-01@mail.brightpath.example", "T-58213.1.support@lumencloud.example"],
        body="""\
Hi Kenji,

Here you go:

  1. Most recent invoice: INV-2024-00562
  2. Last sign-in: Friday 18 October, from Porto
  3. Dashboard: "Weekly Revenue by Region"

Thank you for the quick answer.

Ana

> Please reply to this email (from the same address) with:
> 1. The last four digits of the card on file for the workspace, or the number of your most
>    recent invoice (it starts with INV-).
""",
    ),
    dict(
        frm="Kenji Sato (Lumen Cloud Support) <support@lumencloud.example>", to="Ana Silva <ana.silva@brightpath.example>",
        subject="Re: Lost my phone - can't get past two-factor login [T-58213]", date="2024-10-21T13:30:00+00:00",
        msgid="T-58213.2.support@lumencloud.example",
        refs=["CAKx7Lq2-lost2fa-01@mail.brightpath.example", "T-58213.1.support@lumencloud.example",
              "CAKx7Lq2-lost2fa-02@mail.brightpath.example"],
        body="""\
Hi Ana,

Thanks, everything matches. I have removed two-factor authentication from your account, and
for safety I also signed out all existing sessions, including any on the stolen phone.

Next steps:

  - Sign in with your password. You will be asked to set up 2FA again straight away, because
    your workspace requires it.
  - This time, save the 10 backup codes in your password manager. Each one works once if you
    lose your device again.
  - Consider making a colleague a second Owner (Settings > Members). Then an Owner can reset
    2FA for the other within minutes, without a support ticket.

I'll close ticket T-58213 now; just reply if anything else comes up.

Best,
Kenji Sato
Lumen Cloud Support
""",
    ),
]


def main():
    # billing: plain text body + .txt attachment
    m = base("Helena Brandt <billing@lumencloud.example>", "Accounts Payable <ap@northwind-logistics.example>",
             "Wire transfer details for invoice INV-2024-00817", "2024-10-16T14:05:00+00:00",
             "inv-2024-00817.wire.7f3a@lumencloud.example")
    m.set_content(WIRE_BODY, cte="7bit")
    m.add_attachment(WIRE_ATTACHMENT, subtype="plain", cte="7bit",
                     filename="wire-transfer-instructions.txt")
    write(ROOT / "support/billing/invoice-wire-transfer.eml", m)

    # billing: multipart/alternative text + HTML
    m = base("Lumen Cloud Billing <no-reply@lumencloud.example>", "Ana Silva <ana.silva@brightpath.example>",
             "Your Lumen Cloud Team plan renews on 1 December 2024", "2024-11-01T07:00:00+00:00",
             "renewal-reminder.ws_7Hq2.20241101@lumencloud.example")
    m.set_content(RENEWAL_TEXT, cte="7bit")
    m.add_alternative(RENEWAL_HTML, subtype="html", cte="7bit")
    write(ROOT / "support/billing/annual-renewal-reminder.eml", m)

    # account: multipart/alternative text + HTML
    m = base("Lumen Cloud Security <security-noreply@lumencloud.example>", "Marcus Webb <marcus.webb@brightpath.example>",
             "New sign-in to your Lumen Cloud account", "2024-10-14T21:38:00+00:00",
             "signin-alert.8c41d2e9@lumencloud.example")
    m.set_content(SIGNIN_TEXT, cte="7bit")
    m.add_alternative(SIGNIN_HTML, subtype="html", cte="7bit")
    write(ROOT / "support/account/new-device-sign-in.eml", m)

    # account: text body + PDF attachment
    m = base("Lumen Cloud Privacy <privacy@lumencloud.example>", "Ana Silva <ana.silva@brightpath.example>",
             "Your personal data export is ready (DSR-2024-11873)", "2024-11-03T09:12:00+00:00",
             "dsr-2024-11873.ready@lumencloud.example")
    m.set_content(EXPORT_TEXT, cte="7bit")
    m.add_attachment(export_receipt_pdf(), maintype="application", subtype="pdf",
                     filename="data-export-receipt-DSR-2024-11873.pdf")
    write(ROOT / "support/account/data-export-ready.eml", m)

    # account: mbox thread
    path = ROOT / "support/account/lost-2fa-device-thread.mbox"
    if path.exists():
        path.unlink()
    box = mailbox.mbox(str(path), create=True)
    box.lock()
    try:
        for t in THREAD:
            extra = {}
            if t["refs"]:
                extra = {"In_Reply_To": f"<{t['refs'][-1]}>", "References": " ".join(f"<{r}>" for r in t["refs"])}
            msg = base(t["frm"], t["to"], t["subject"], t["date"], t["msgid"], **extra)
            msg.set_content(t["body"], cte="7bit")
            mm = mailbox.mboxMessage(msg)
            addr = t["frm"].split("<")[1].rstrip(">")
            mm.set_from(addr, dt.datetime.fromisoformat(t["date"]).timetuple())
            box.add(mm)
        box.flush()
    finally:
        box.unlock()
        box.close()
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes, {len(THREAD)} messages)")


if __name__ == "__main__":
    main()
