"""Generate the PDF documents of sample_corpus/ with fpdf2.

fpdf2 is a tool for regenerating these committed files only, not a runtime dependency:

    .venv/bin/pip install fpdf2
    .venv/bin/python sample_corpus/_tools/build_pdfs.py

Each PDF gets explicit page breaks so that the facts on page 2 are distinct from page 1
(tests use this to check page-level citations). Core PDF fonts are latin-1 only: keep text ASCII.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from fpdf import FPDF

ROOT = Path(__file__).resolve().parents[1]


class Doc(FPDF):
    def __init__(self, title: str, author: str, date: str, footer_text: str):
        super().__init__(format="A4")
        self.doc_title = title
        self.footer_text = footer_text
        self.set_title(title)
        self.set_author(author)
        self.set_subject(title)
        self.set_creator("sample_corpus/_tools/build_pdfs.py (fpdf2)")
        d = dt.datetime.fromisoformat(date).replace(tzinfo=dt.timezone.utc)
        self.set_creation_date(d)
        self.set_auto_page_break(auto=True, margin=20)
        self.set_margins(20, 20, 20)

    def header(self):
        self.set_font("Helvetica", "I", 8)
        self.set_text_color(110)
        self.cell(0, 6, f"Lumen Cloud - {self.doc_title}", align="R", new_x="LMARGIN", new_y="NEXT")
        self.set_text_color(0)
        self.ln(2)

    def footer(self):
        self.set_y(-15)
        self.set_font("Helvetica", "I", 8)
        self.set_text_color(110)
        self.cell(0, 8, f"{self.footer_text} | Page {self.page_no()}/{{nb}}", align="C")
        self.set_text_color(0)

    def h1(self, text):
        self.set_font("Helvetica", "B", 18)
        self.multi_cell(0, 9, text, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def h2(self, text):
        self.ln(2)
        self.set_font("Helvetica", "B", 13)
        self.multi_cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")
        self.ln(1)

    def p(self, text):
        self.set_font("Helvetica", "", 10.5)
        self.multi_cell(0, 5.5, text, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def bullets(self, items):
        self.set_font("Helvetica", "", 10.5)
        for it in items:
            self.multi_cell(0, 5.5, "-  " + it, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def table(self, rows, widths):
        self.set_font("Helvetica", "", 9.5)
        with super().table(col_widths=widths, text_align="LEFT", line_height=5.5) as t:
            for row in rows:
                r = t.row()
                for cell in row:
                    r.cell(cell)
        self.ln(3)


def pricing(path: Path):
    d = Doc("Pricing and Plans 2024", "Tomas Varga", "2024-01-15", "Lumen Cloud Inc. - Price list effective 2024-01-15")
    d.alias_nb_pages()
    d.add_page()
    d.h1("Lumen Cloud Pricing and Plans 2024")
    d.p("This price list applies to new subscriptions and renewals from 15 January 2024. Prices are per user "
        "and exclude VAT, GST and sales tax. Every workspace starts with a 14-day trial of the Team plan "
        "for up to 10 users; no payment method is needed to start the trial.")
    d.h2("Plans")
    d.table([
        ("Plan", "Monthly billing", "Annual billing", "Users"),
        ("Starter", "USD 19 per user / month", "USD 190 per user / year", "1 to 5"),
        ("Team", "USD 49 per user / month", "USD 490 per user / year", "up to 100"),
        ("Enterprise", "not available", "custom quote", "25 minimum"),
    ], (28, 50, 50, 42))
    d.p("Annual billing costs the same as ten months of monthly billing: two months are free. "
        "Enterprise is sold annually through the sales team and includes SAML single sign-on, SCIM provisioning, "
        "a 2-year audit log, a 99.9% uptime commitment and 24/7 support with a named customer success manager.")
    d.h2("What every plan includes")
    d.bullets([
        "Unlimited viewers of public (link-shared) dashboards.",
        "Scheduled reports by email and Slack.",
        "The REST API, the Python and JavaScript SDKs and the lumen CLI.",
        "Data hosting in the EU (Frankfurt) or the US (Oregon), chosen when the workspace is created.",
    ])
    d.p("Prices in EUR, GBP and AUD are published in separate fixed price lists and are not converted "
        "from USD at daily exchange rates.")

    d.add_page()
    d.h1("Product codes (SKUs) and add-ons")
    d.p("Purchasing departments often need the exact product code for a purchase order. "
        "The following SKUs appear on Lumen Cloud quotes and invoices.")
    d.table([
        ("SKU", "Product", "List price (USD)"),
        ("SKU-STARTER-MONTHLY-2024", "Starter plan, billed monthly", "19 per user / month"),
        ("SKU-STARTER-ANNUAL-2024", "Starter plan, billed annually", "190 per user / year"),
        ("SKU-TEAM-MONTHLY-2024", "Team plan, billed monthly", "49 per user / month"),
        ("SKU-TEAM-ANNUAL-2024", "Team plan, billed annually", "490 per user / year"),
        ("SKU-ENT-PLATFORM-2024", "Enterprise platform fee", "from 24,000 per year"),
    ], (62, 62, 46))
    d.h2("Add-ons")
    d.table([
        ("SKU", "Add-on", "Price (USD)", "Plans"),
        ("SKU-ADDON-SEATS-10", "Pack of 10 Viewer seats", "150 per month", "Team"),
        ("SKU-ADDON-CREDITS-100K", "100,000 extra query credits", "99, billed in arrears", "Team, Enterprise"),
        ("SKU-ADDON-SUPPORT-PLUS", "Support Plus: 1-hour response for urgent tickets", "500 per month", "Team"),
    ], (50, 60, 32, 28))
    d.p("The Viewer seat pack is the cheapest way to give read-only access to large groups: "
        "10 Viewer seats cost the same as about three Team seats. Viewer seats cannot create or edit dashboards.")
    d.h2("Discounts")
    d.bullets([
        "Registered nonprofits and accredited schools and universities: 30% off Team, on request with proof of status.",
        "Enterprise agreements signed for three years: 10% off the platform fee, with prices fixed for the whole term.",
        "Startups in a partner accelerator program: Team free for the first 12 months, up to 10 users.",
    ])
    d.p("Discounts cannot be combined, and they apply from the next renewal when added to an existing subscription.")
    d.output(str(path))


def connectors(path: Path):
    d = Doc("Data Connector Troubleshooting Guide", "Mei Lin", "2024-06-12", "Lumen Cloud Support - Connector guide v4")
    d.alias_nb_pages()
    d.add_page()
    d.h1("Data Connector Troubleshooting Guide")
    d.p("Data connectors copy data from your databases, warehouses and SaaS tools into Lumen Cloud on a schedule. "
        "When a sync fails, the connector shows a red status badge, Admins receive an email, and a sync.failed "
        "webhook is sent if you subscribed to it. This guide lists the most common failures and how to fix them.")
    d.h2("Sync frequency by plan")
    d.table([
        ("Plan", "Fastest schedule", "Connectors"),
        ("Starter", "every 24 hours", "3"),
        ("Team", "every hour", "25"),
        ("Enterprise", "every 15 minutes", "unlimited"),
    ], (50, 60, 60))
    d.h2("Step 1: run the connection test")
    d.p("Open the connector and click Test connection. The test checks, in order: DNS resolution, network reachability, "
        "TLS, authentication, and permission to read one table. The first step that fails tells you where to look.")
    d.h2("Common errors")
    d.bullets([
        "PostgreSQL / MySQL - 'password authentication failed': the password was changed or the user was locked. "
        "Update the credentials in the connector settings.",
        "PostgreSQL - 'no pg_hba.conf entry for host': the database does not accept connections from Lumen Cloud. "
        "Add our addresses (see page 2) to pg_hba.conf and to your firewall.",
        "Snowflake - 'warehouse is suspended': the warehouse auto-suspended and the connector's role cannot resume it. "
        "Grant OPERATE on the warehouse to the role, or enable auto-resume.",
        "BigQuery - 'Access Denied: bigquery.jobs.create': the service account needs the BigQuery Job User role "
        "on the project in addition to Data Viewer on the dataset.",
        "Salesforce - 'INVALID_SESSION_ID': the OAuth token was revoked, often when the connecting user was deactivated. "
        "Reconnect with an integration user.",
    ])
    d.p("After a failure, the next scheduled sync retries automatically and catches up on missed data. "
        "A connector that fails 10 times in a row is paused; resume it manually once the cause is fixed.")

    d.add_page()
    d.h1("Network access and IP allowlisting")
    d.p("If your database sits behind a firewall, allow inbound connections from the Lumen Cloud egress addresses "
        "of your workspace's data region. All connector traffic comes from these fixed addresses; they change only "
        "with 60 days of notice by email to workspace Owners.")
    d.table([
        ("Data region", "Egress IP addresses"),
        ("EU (Frankfurt)", "203.0.113.10, 203.0.113.11, 203.0.113.12"),
        ("US (Oregon)", "198.51.100.24, 198.51.100.25, 198.51.100.26"),
    ], (50, 120))
    d.h2("SSH tunnels")
    d.p("Databases that must not be reachable from the internet can be connected through an SSH bastion host. "
        "Create a user named lumen on the bastion, add the public key shown in the connector settings to its "
        "authorized_keys file, and allow the egress addresses above to reach port 22 of the bastion only.")
    d.h2("Private connectivity (Enterprise)")
    d.p("Enterprise workspaces on AWS can connect over AWS PrivateLink instead of the public internet. "
        "Setup is done with our support team and takes about one week. Google Cloud Private Service Connect "
        "is available on request.")
    d.h2("Default ports")
    d.bullets(["PostgreSQL 5432", "MySQL 3306", "SQL Server 1433", "Snowflake, BigQuery and SaaS connectors: HTTPS 443"])
    d.output(str(path))


def onboarding(path: Path):
    d = Doc("Engineering Onboarding", "Ines Duarte", "2024-02-05", "Lumen Engineering Handbook - Internal")
    d.alias_nb_pages()
    d.add_page()
    d.h1("Welcome to Lumen Engineering")
    d.p("This guide covers your first weeks as an engineer at Lumen Cloud. Your manager and your onboarding buddy "
        "will walk you through it, but it is written so that you can also follow it on your own.")
    d.h2("Before day one")
    d.bullets([
        "Your laptop is shipped to your home address and arrives at least three days before your start date.",
        "You receive an invitation to your company Google account; all other tools use it for single sign-on.",
    ])
    d.h2("Week one")
    d.bullets([
        "Day 1: meet your manager and your onboarding buddy, a teammate who answers questions for your first two months.",
        "Day 1: get access to GitHub, Slack, Jira, Vault and the staging environment. Production access is granted in week 3.",
        "Day 2: set up the development environment with 'make bootstrap' in the monorepo; it takes about 40 minutes.",
        "Day 3 to 5: pick up a starter ticket labelled good-first-issue and open your first pull request.",
    ])
    d.h2("Weeks two to four")
    d.bullets([
        "Do your first production deploy with shipit, together with your buddy, within your first two weeks.",
        "Attend an incident review and read three recent postmortems.",
        "Read the handbook pages on code review, deploys and incident response.",
    ])
    d.p("Nobody expects you to be productive in week one. Ask questions in #eng-help; there are no silly questions.")

    d.add_page()
    d.h1("After the first month")
    d.h2("30-60-90 day goals")
    d.bullets([
        "Day 30: you have shipped at least one change to production and can run your team's services locally.",
        "Day 60: you own a small feature end to end, from design to release notes.",
        "Day 90: you shadow two on-call shifts and join your team's on-call rotation after your third month.",
    ])
    d.h2("Learning and growth")
    d.bullets([
        "Every engineer has a learning budget of EUR 1,500 per year for books, courses and conferences.",
        "Attending one conference per year is encouraged; speakers get an extra two days of paid time.",
        "Career levels and expectations are described in the engineering career ladder (levels E1 to E6).",
    ])
    d.h2("Rituals")
    d.bullets([
        "Engineering all-hands: first Thursday of each month, 16:00 UTC, recorded for other time zones.",
        "Demo Friday: every second Friday, teams show what they shipped in 5-minute demos.",
        "Quarterly hack week: one week per quarter with no planned sprint work.",
    ])
    d.p("Your first performance conversation happens at the end of month three, with written feedback from your "
        "buddy and your manager.")
    d.output(str(path))


def main():
    targets = {
        ROOT / "support/billing/pricing-and-plans.pdf": pricing,
        ROOT / "support/technical/connector-troubleshooting.pdf": connectors,
        ROOT / "engineering/handbook/engineering-onboarding.pdf": onboarding,
    }
    for path, fn in targets.items():
        fn(path)
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
