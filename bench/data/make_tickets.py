#!/usr/bin/env python3
"""Generate bench/data/tickets.csv: synthetic customer-support tickets for the
pg_llm demo and benchmarks.

The tickets belong to a fictional company, Kestrel Systems, which sells four
products: the Kestrel Cloud Suite (SaaS: documents, calendar, admin console),
Kestrel Sync (file sync for desktop and phone), the Kestrel RX router line
(home/office hardware) and the Kestrel mobile app; billing questions are filed
under "Billing".  Every body is composed from hand-written sentence fragments
per issue type (opening, details, what the customer tried, impact, request,
sign-off) with seeded random choices and slot values (order numbers, dates,
versions, error messages), so bodies are varied but coherent.  A few tickets
are written in Spanish, German, French or Japanese, and some contain emoji.

Deterministic: the same script always writes the same file (fixed seed, no
clock, no environment).  Columns: id,subject,body,product,priority; RFC 4180
quoting (Python csv, QUOTE_MINIMAL, \\n line ends), UTF-8, header row — what
PostgreSQL's  \\copy tickets FROM 'bench/data/tickets.csv' CSV HEADER  reads.

Usage: python3 bench/data/make_tickets.py [OUT.csv]   (default: next to this script)
"""
import csv
import io
import os
import random
import sys

N_TICKETS = 512
SEED = 20240611
MIN_WORDS, MAX_WORDS = 40, 200

FIRST_NAMES = ["Maria", "James", "Aiko", "Lukas", "Priya", "Tom", "Fatima", "Chen", "Olivia",
               "Mateo", "Sven", "Grace", "Omar", "Hannah", "Diego", "Yuki", "Nadia", "Peter",
               "Amara", "Ravi", "Elena", "Jonas", "Sophie", "Kwame", "Laura", "Ahmed", "Mia",
               "Noah", "Isabel", "Daniel", "Zoe", "Viktor", "Leila", "Sam", "Ingrid", "Carlos"]
LAST_NAMES = ["Garcia", "Smith", "Tanaka", "Becker", "Sharma", "Brown", "Haddad", "Wei", "Jones",
              "Rossi", "Larsen", "Okafor", "Novak", "Kim", "Silva", "Dubois", "Murphy", "Ivanova",
              "Patel", "Schmidt", "Andersson", "Mensah", "Lopez", "Nakamura", "Walsh", "Fischer"]
COMPANIES = ["Brightwater Dental", "Hollis & Reed LLP", "Orchard Lane Bakery", "Quantix Labs",
             "Bluefin Logistics", "Maple Street Library", "Nordlicht GmbH", "Sunrise Yoga Studio",
             "Atlas Engineering", "Riverside Veterinary Clinic", "Cobalt Design Co.",
             "Greenfield Farms", "Harbor Point Realty", "Pixelmint Games", "Westbrook Accounting"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
DEVICES = ["iPhone 13", "iPhone 15 Pro", "Pixel 7", "Pixel 8a", "Galaxy S23", "Galaxy A54",
           "OnePlus 11", "iPad Air", "Moto G Power"]
DESKTOPS = ["Windows 11", "Windows 10", "macOS Sonoma", "macOS Ventura", "Ubuntu 22.04"]
BROWSERS = ["Chrome", "Firefox", "Safari", "Edge"]
ROUTERS = ["RX-300", "RX-500", "RX-900 Pro"]
PLANS = ["Starter", "Team", "Business", "Enterprise"]


def slots(rng):
    """Random slot values for one ticket (consistent within the ticket)."""
    day = rng.randint(1, 28)
    month = rng.choice(MONTHS)
    return {
        "order": "KS-%d" % rng.randint(100000, 999999),
        "invoice": "INV-2024-%04d" % rng.randint(1, 9999),
        "date": "%s %d" % (month, day),
        "date2": "%s %d" % (month, min(day + rng.randint(1, 3), 28)),
        "amount": "%d.%02d" % (rng.choice([9, 12, 19, 29, 49, 99, 149, 249]), rng.choice([0, 99, 50, 0])),
        "seats": rng.choice([3, 5, 8, 12, 25, 40, 120]),
        "plan": rng.choice(PLANS),
        "plan2": rng.choice(PLANS),
        "device": rng.choice(DEVICES),
        "desktop": rng.choice(DESKTOPS),
        "browser": rng.choice(BROWSERS),
        "router": rng.choice(ROUTERS),
        "fw": "%d.%d.%d" % (rng.randint(2, 4), rng.randint(0, 9), rng.randint(0, 19)),
        "appver": "%d.%d.%d" % (rng.randint(3, 5), rng.randint(0, 12), rng.randint(0, 9)),
        "code": rng.choice(["E1042", "E2210", "E0413", "E3001", "E1777", "E0098"]),
        "hours": rng.choice(["two hours", "three days", "since yesterday", "all week", "45 minutes"]),
        "n": rng.randint(2, 6),
        "files": rng.randint(20, 3000),
        "folder": rng.choice(["Projects/2024", "Shared/Marketing", "Clients/Invoices", "Photos/Summer",
                              "Design assets", "HR/Contracts"]),
        "file": rng.choice(["Q3 report.xlsx", "budget_final_v2.xlsx", "contract-draft.docx",
                            "team photo.jpg", "notes.md", "pitch deck.pptx"]),
        "company": rng.choice(COMPANIES),
        "time": "%d:%02d %s" % (rng.randint(1, 12), rng.choice([0, 15, 30, 45]), rng.choice(["am", "pm"])),
        "card": "%04d" % rng.randint(1000, 9999),
    }


# Each issue type: product, priority weights (low, normal, high, urgent),
# subjects, openings, details, tried, and specific requests.
ISSUES = {
    "login_failure": dict(
        product="Cloud Suite", prio=(1, 4, 4, 2),
        subjects=["Cannot log in to my account", "Login problem", "Can't sign in"],
        variants=[(["Locked out of Cloud Suite"], "I can't log in to the Cloud Suite anymore."),
                  (["Login fails with \"invalid credentials\""],
                   "Since {date} my login fails with \"Invalid username or password\", although I'm 100% sure the password is right."),
                  (["Sign-in loop on the admin console"],
                   "Every time I try to sign in to the admin console I get sent back to the login page."),
                  (["Account locked?"], "My account seems to be locked and I don't know why."),
                  (["Login broken after password change"],
                   "Logging in stopped working right after I changed my password on {date}.")],
        details=["I'm using {browser} on {desktop}.",
                 "After I enter my code from the authenticator app, the page just reloads.",
                 "Two colleagues on the same team can still log in without problems.",
                 "The message on screen is \"Error {code}: session could not be established\".",
                 "It works on my phone but not on my laptop.",
                 "We use single sign-on through our company directory, if that matters."],
        tried=["I cleared the cookies and cache.", "I tried a private window and a different browser.",
               "I reset my password twice.", "I restarted the computer.",
               "I checked that the clock on my laptop is correct."],
        requests=["Can you unlock my account or tell me what is going on?",
                  "Please help me get back in.",
                  "Could someone check whether my account is disabled?"]),
    "password_reset": dict(
        product="Cloud Suite", prio=(1, 5, 3, 1),
        subjects=["Password reset not working", "Problem resetting my password"],
        variants=[(["Password reset email never arrives", "No reset email"],
                   "I requested a password reset but the email never came."),
                  (["Reset link expired immediately"],
                   "The password reset link says it has expired as soon as I click it."),
                  (["Forgot password"], "I forgot my password and the reset process doesn't work.")],
        details=["I requested it {n} times over the last hour.",
                 "I checked the spam and junk folders, nothing there.",
                 "My email address is the one on the account, I double-checked the spelling.",
                 "The link in the email opens a page that says \"Token invalid or expired\".",
                 "Our mail server is run by our IT department, and they see no blocked messages.",
                 "Other emails from you, like the newsletter, arrive fine."],
        tried=["I waited more than an hour before trying again.",
               "I copied the link into another browser instead of clicking it.",
               "I asked IT to whitelist your domain."],
        requests=["Could you reset it manually or send the link another way?",
                  "Please let me know how to get access again.",
                  "What else can I do to receive the reset email?"]),
    "two_factor": dict(
        product="Cloud Suite", prio=(0, 3, 5, 3),
        subjects=["Need to reset two-factor authentication", "2FA problem"],
        variants=[(["Lost phone with 2FA codes"], "I lost my phone and with it the authenticator app for my account."),
                  (["Two-factor codes rejected"], "My two-factor codes are always rejected."),
                  (["New phone, can't pass 2FA"], "I got a new phone and now I can't pass the two-factor step.")],
        details=["I don't have the backup codes anymore, I think they were in an old notebook.",
                 "The code is accepted on my colleague's account but not on mine.",
                 "I am the only administrator of our workspace with {seats} users.",
                 "The error is \"Verification failed ({code})\".",
                 "I can prove my identity with the card ending in {card} that pays for the subscription."],
        tried=["I synced the time on the phone.", "I reinstalled the authenticator app.",
               "I tried the SMS option but the SMS never arrives."],
        requests=["Please reset two-factor authentication for my account.",
                  "What documents do you need to verify that I am the account owner?",
                  "Can you help me regain access? My whole team depends on it."]),
    "double_charge": dict(
        product="Billing", prio=(0, 3, 5, 2),
        subjects=["Charged twice this month", "Double charge on my card",
                  "Billed two times for the same subscription"],
        variants=[([], "I was charged twice for my subscription this month."),
                  ([], "My bank statement shows two identical charges from Kestrel Systems."),
                  (["Duplicate payment for order {order}"], "You billed my card twice for order {order}.")],
        details=["Both charges are ${amount} and both are dated {date}.",
                 "The card ending in {card} was used for both payments.",
                 "The invoice in the billing page only shows one payment.",
                 "I am on the {plan} plan and I only have one workspace.",
                 "This happened once before in the spring and it took weeks to fix.",
                 "The second charge appeared on {date2}, two days after the first."],
        tried=["I checked with my bank and they confirmed both charges went through.",
               "I looked at the billing history in the admin console.",
               "I made sure I don't have a second account under another email."],
        requests=["Please refund the duplicate charge.",
                  "I'd like the second payment reversed as soon as possible.",
                  "Can you confirm when the refund will be processed?"]),
    "refund_request": dict(
        product="Billing", prio=(1, 5, 3, 0),
        subjects=["Requesting a refund", "Refund request"],
        variants=[(["Refund request for annual plan"],
                   "I'd like to request a refund for the annual {plan} plan I bought on {date}."),
                  (["Accidental upgrade - refund please"], "We upgraded by mistake and would like a refund."),
                  (["Refund for unused seats"], "We reduced our team and have {n} seats we no longer use.")],
        details=["The order number is {order} and the amount was ${amount}.",
                 "We only used the product for a few days before deciding it isn't right for us.",
                 "Your website says there is a 30-day money-back guarantee.",
                 "Someone on our team clicked upgrade without checking with me first.",
                 "The invoice number is {invoice}."],
        tried=["I tried to downgrade in the billing page but the refund option is greyed out."],
        requests=["Please let me know how to proceed with the refund.",
                  "Could you refund the difference to the original card?",
                  "Please confirm the refund by email."]),
    "invoice_vat": dict(
        product="Billing", prio=(2, 5, 2, 0),
        subjects=["Corrected invoice needed for {invoice}", "Problem with invoice {invoice}"],
        variants=[(["Invoice shows wrong VAT"],
                   "Our latest invoice {invoice} lists VAT even though we should be reverse-charged."),
                  (["Need company name on invoice"],
                   "Invoice {invoice} is issued to my personal name, but it needs to show our company {company}."),
                  (["Wrong billing address on invoice"], "The billing address on invoice {invoice} is our old office.")],
        details=["Our VAT number is saved in the account settings.",
                 "Our accountant cannot book the invoice in its current form.",
                 "We moved offices on {date} and updated the address the same day.",
                 "We need the corrected invoice before the end of the month to close the books.",
                 "The amount itself (${amount}) is correct, only the tax line is wrong."],
        tried=["I updated the details in the billing settings but old invoices did not change."],
        requests=["Please issue a corrected invoice.",
                  "Can you re-send the invoice with the right details?",
                  "Could you also fix this for future invoices?"]),
    "plan_change": dict(
        product="Billing", prio=(3, 5, 1, 0),
        subjects=["Question about our plan"],
        variants=[(["Switch from {plan} to {plan2}", "Changing plans"],
                   "We want to move from the {plan} plan to the {plan2} plan."),
                  (["How are plan changes billed?"], "I have a question about how plan changes are billed."),
                  (["Question about prorated charges"], "I'm confused by the prorated charge on my last invoice.")],
        details=["We currently have {seats} seats.",
                 "The charge of ${amount} on {date} doesn't match what the pricing page says.",
                 "I don't want to lose any documents when we switch.",
                 "Our contract renews in {n} months."],
        tried=["I looked through the help center but the article about proration is unclear."],
        requests=["Could you explain how the proration is calculated?",
                  "Please tell me what happens to our data if we downgrade.",
                  "Can you make the change for us at the end of the billing period?"]),
    "sync_conflict": dict(
        product="Sync", prio=(1, 4, 4, 1),
        subjects=["Sync conflict on shared file", "Problem with shared file sync"],
        variants=[(["Files duplicated with \"conflicted copy\""],
                   "Kestrel Sync keeps creating conflicted copies of our files."),
                  (["SYNC_CONFLICT 409 errors"],
                   "I get \"SYNC_CONFLICT 409: file '{file}' was modified on two devices\"."),
                  (["Changes overwritten by sync"],
                   "Someone's changes to '{file}' were overwritten by an older version.")],
        details=["It happens in the folder {folder}, which is shared by {n} people.",
                 "I'm on {desktop} with Sync version {appver}.",
                 "Nobody else was editing the file at the time, I'm sure of it.",
                 "There are now {n} copies of the same spreadsheet and I don't know which one is current.",
                 "The version history shows an edit from a device I don't recognise.",
                 "It started after the update on {date}."],
        tried=["I paused and resumed sync.", "I signed out of the app and signed back in.",
               "I restored the file from version history, but the conflict came back."],
        requests=["How can we stop this from happening?",
                  "Please tell me which copy is the real one and how to merge them.",
                  "Is this a known bug in the latest version?"]),
    "sync_missing": dict(
        product="Sync", prio=(0, 2, 5, 4),
        subjects=["Files disappeared after sync", "Missing files", "Sync deleted my files"],
        variants=[(["Folder {folder} is empty"], "After syncing this morning the folder {folder} is empty."),
                  ([], "About {files} files disappeared from {folder}."),
                  ([], "Kestrel Sync removed files from my laptop without asking.")],
        details=["The files are also gone from the web interface.",
                 "The trash only contains a few of them.",
                 "I'm using Sync {appver} on {desktop}.",
                 "The activity log shows a deletion from my phone, but I didn't delete anything.",
                 "These are client documents we are legally required to keep.",
                 "The last time everything was there was on {date}."],
        tried=["I checked the trash and the version history.", "I did not touch the folder on any device.",
               "I stopped the sync client so it doesn't make things worse."],
        requests=["Please restore the files as soon as possible.",
                  "Can you recover the folder from your backups?",
                  "I need to know if the data can still be recovered."]),
    "sync_slow": dict(
        product="Sync", prio=(2, 5, 2, 0),
        subjects=["Sync extremely slow", "Sync problem"],
        variants=[([], "Syncing has become extremely slow."),
                  (["Upload stuck at 99%"], "The upload of {files} files has been stuck at 99% for {hours}."),
                  (["Sync never finishes"], "Sync keeps saying \"Preparing changes\" and never finishes.")],
        details=["Our internet connection is fine, speed tests show 300 Mbit/s.",
                 "The app uses a lot of CPU while it's stuck.",
                 "I'm on {desktop}, Sync version {appver}.",
                 "The log shows \"Error {code}: upload session timed out\" over and over.",
                 "Smaller folders sync normally."],
        tried=["I restarted the app and the computer.", "I excluded the big video folder.",
               "I reinstalled Sync."],
        requests=["What can I do to speed it up?",
                  "Can you look at the logs for my account?",
                  "Is there a limit on file size that I am hitting?"]),
    "router_wifi": dict(
        product="Router RX", prio=(1, 3, 4, 2),
        subjects=["{router} keeps disconnecting", "Wi-Fi problems with {router}"],
        variants=[(["Wi-Fi drops every evening"],
                   "Our {router} router drops the Wi-Fi connection every evening around {time}."),
                  (["Router loses connection several times a day"],
                   "The Wi-Fi from my {router} disconnects several times a day."),
                  (["Unstable 5 GHz on {router}"], "Devices keep falling off the 5 GHz network of our {router}.")],
        details=["The firmware version is {fw}.",
                 "The status light turns orange for about a minute and then comes back.",
                 "Wired devices stay connected, only Wi-Fi is affected.",
                 "We have about {n} dozen devices, including smart plugs and cameras.",
                 "I work from home and lose video calls every time this happens.",
                 "The system log shows \"wlan1: radar detected, switching channel\"."],
        tried=["I rebooted the router several times.", "I changed the channel from auto to 36.",
               "I did a factory reset and set it up again.", "I moved the router away from the microwave."],
        requests=["What else can we try?", "Is there a firmware update that fixes this?",
                  "If it's faulty, can we get a replacement under warranty?"]),
    "router_firmware": dict(
        product="Router RX", prio=(0, 2, 4, 4),
        subjects=["Firmware update failed, router won't boot", "Router bricked after update"],
        variants=[([], "The firmware update on my {router} failed halfway."),
                  ([], "After the automatic update last night my {router} doesn't start anymore."),
                  (["Update to {fw} failed"],
                   "The web interface said the update to firmware {fw} failed and now the router won't boot.")],
        details=["The power light blinks red and nothing else happens.",
                 "I bought the router on {date}, order number {order}.",
                 "Our whole office has no internet now.",
                 "I can't reach the admin page at 192.168.1.1 anymore.",
                 "The update was started by the app, I didn't do anything manually."],
        tried=["I held the reset button for 30 seconds.", "I unplugged it for ten minutes.",
               "I tried the recovery mode described in the manual, but the page never loads."],
        requests=["Please tell me how to recover it.", "I need a replacement shipped urgently.",
                  "Can you send me the recovery image?"]),
    "router_setup": dict(
        product="Router RX", prio=(3, 5, 1, 0), calm=True,
        subjects=["Setup question for {router}"],
        variants=[(["Port forwarding not working"],
                   "I'm trying to set up port forwarding on my {router} and it doesn't work."),
                  (["How do I set up a guest network?"], "I want a separate guest network for visitors."),
                  (["VPN passthrough on {router}"], "Our VPN client can't connect when we are behind the {router}.")],
        details=["I forwarded port 8443 to my home server but it's not reachable from outside.",
                 "Firmware is {fw}.",
                 "The guest network option is missing from the menu in the app.",
                 "Our provider gives us a public IPv4 address, I checked.",
                 "The same setup worked with my old router."],
        tried=["I followed the guide in the help center step by step.",
               "I disabled the firewall temporarily to test."],
        requests=["Could you tell me what I'm missing?", "Is this supported on my model?",
                  "A step-by-step explanation would be great."]),
    "mobile_crash": dict(
        product="Mobile App", prio=(1, 3, 5, 1),
        subjects=["Mobile app keeps crashing", "App crash on {device}"],
        variants=[(["App crashes on startup", "Mobile app closes immediately"],
                   "The Kestrel app crashes as soon as I open it."),
                  (["Crash when opening the camera"],
                   "The app keeps crashing when I open the camera to scan a document."),
                  (["Crash after update {appver}"], "Since the update to version {appver} the app closes by itself.")],
        details=["I have a {device} with the latest system update.",
                 "It crashes right after the splash screen.",
                 "My colleague with the same phone has no problem.",
                 "The crash happens every single time, not just occasionally.",
                 "I need the app to scan receipts on the road."],
        tried=["I reinstalled the app.", "I restarted the phone.", "I cleared the app data.",
               "I gave the app camera permission again."],
        requests=["Is a fix on the way?", "Can I install the previous version in the meantime?",
                  "Please let me know if you need crash logs."]),
    "mobile_notifications": dict(
        product="Mobile App", prio=(3, 5, 1, 0),
        subjects=["Problem with notifications"],
        variants=[(["No push notifications"], "I don't get any push notifications from the app."),
                  (["Notifications arrive hours late"], "Notifications about shared files arrive hours late."),
                  (["Too many notifications"],
                   "The app sends me a notification for every tiny change and it's driving me crazy.")],
        details=["Notifications are enabled in the phone settings.",
                 "My phone is a {device}.",
                 "Battery optimisation is turned off for the app.",
                 "App version {appver}."],
        tried=["I logged out and back in.", "I toggled notifications off and on."],
        requests=["How can I fix this?", "Is there a way to get only a daily summary?",
                  "Could you check if this is a known issue?"]),
    "feature_request": dict(
        product="Cloud Suite", prio=(6, 4, 0, 0), calm=True,
        subjects=["Feature request", "Suggestion for the Cloud Suite"],
        variants=[(["Feature request: dark mode"], "I'd love to see a dark mode in the Cloud Suite."),
                  (["Please add CSV export"], "It would be really useful to export reports as CSV."),
                  (["Suggestion: calendar integration"], "Could you add an integration with our calendar system?"),
                  (["API access for the {plan} plan"], "We would like API access on the {plan} plan."),
                  (["Feature request: bulk user import"],
                   "Adding users one by one is painful; please add a bulk import.")],
        details=["We have {seats} people using the product every day.",
                 "Right now we copy the data into a spreadsheet by hand.",
                 "Several competitors already offer this.",
                 "I work late and the bright screen is tiring on the eyes.",
                 "Even a simple version would help us a lot."],
        tried=[],
        requests=["Is this on your roadmap?", "Please consider it for a future release.",
                  "Let me know if you'd like feedback on a beta."]),
    "cancellation": dict(
        product="Billing", prio=(1, 4, 3, 1),
        subjects=["Cancel my account", "Please cancel subscription"],
        variants=[([], "Please cancel my account and subscription."),
                  ([], "I want to cancel the {plan} plan effective immediately."),
                  (["Cancellation request - no reply so far"],
                   "This is not the first time I'm asking you to cancel my subscription.")],
        details=["I already sent a request on {date} and got no answer.",
                 "We have moved to another provider.",
                 "I don't want to be charged again next month.",
                 "The cancel button in the billing page gives an error."],
        tried=["I tried to cancel myself in the billing settings."],
        requests=["Please confirm the cancellation in writing.",
                  "Make sure no further charges are made.",
                  "Please also delete our data after the cancellation."]),
    "data_export": dict(
        product="Cloud Suite", prio=(2, 4, 3, 1),
        subjects=["Data request"],
        variants=[(["GDPR data export request"],
                   "Under the GDPR I'm requesting a copy of all personal data you hold about me."),
                  (["Export of all workspace data"], "We need a full export of our workspace before our contract ends."),
                  (["Request to delete my personal data"], "Please delete all personal data related to my account.")],
        details=["My account email is the one I'm writing from.",
                 "Our contract ends on {date}.",
                 "The export tool in the admin console stops with \"Error {code}\".",
                 "We have roughly {files} documents and {seats} users."],
        tried=["I tried the self-service export twice."],
        requests=["Please confirm when the export will be ready.",
                  "Let me know the expected timeline.",
                  "Please confirm once the deletion is complete."]),
    "performance": dict(
        product="Cloud Suite", prio=(0, 2, 4, 4),
        subjects=["Service outage?"],
        variants=[(["Cloud Suite very slow today"], "The Cloud Suite has been extremely slow for {hours}."),
                  (["Documents won't load"], "Documents don't load at all, we just see a spinner."),
                  (["Error 503 on the admin console"], "We get \"503 Service Unavailable\" on the admin console.")],
        details=["This affects our whole office of {seats} people.",
                 "Your status page says all systems are operational.",
                 "It's the same in {browser} and on the mobile app.",
                 "We have a client presentation at {time} and need our files.",
                 "Other websites load normally on our network."],
        tried=["We restarted our network equipment.", "We tried from home connections too."],
        requests=["Is there an outage?", "Please give us an update as soon as possible.",
                  "When will this be fixed?"]),
    "integration": dict(
        product="Cloud Suite", prio=(2, 5, 2, 0),
        subjects=["Integration stopped working"],
        variants=[(["Chat integration stopped posting"], "Our chat integration stopped posting notifications on {date}."),
                  (["Webhook deliveries failing"], "Webhook deliveries to our server have been failing since the weekend."),
                  (["Calendar integration broken"], "The calendar integration no longer syncs new events.")],
        details=["The integration page shows \"Last delivery failed: HTTP 401\".",
                 "We didn't change anything on our side.",
                 "Our endpoint responds fine when we test it with curl.",
                 "We are on the {plan} plan."],
        tried=["I disconnected and reconnected the integration.", "I rotated the API token."],
        requests=["Can you check the delivery logs?", "Please advise how to fix it.",
                  "Is there a change on your side we need to adapt to?"]),
}

GREETINGS = ["Hello,", "Hi,", "Hi team,", "Hello support,", "Dear Kestrel support,", "Good morning,",
             "Hey there,", ""]
POLITE_IMPACT = ["It's not urgent, but it would be nice to have it sorted out this week.",
                 "I'd appreciate any help you can give.",
                 "Thanks in advance for looking into this.",
                 "I know you're probably busy, so no rush."]
NEUTRAL_IMPACT = ["This is affecting my work.", "A few people on my team are affected.",
                  "We rely on this every day."]
ANGRY_IMPACT = ["This is really frustrating.", "Honestly, this is unacceptable for a paid service.",
                "I've been a customer for years and I've never been this disappointed.",
                "I have wasted hours on this already.",
                "If this isn't fixed soon we will look for another provider."]
URGENT_IMPACT = ["This is blocking our whole team right now.", "We are losing money every hour this continues.",
                 "Please treat this as urgent.", "We have a deadline tomorrow morning."]
CLOSINGS_POLITE = ["Thank you!", "Many thanks,", "Thanks so much,", "Kind regards,", "Best regards,",
                   "Thanks a lot for your help 🙏", "Cheers,", "Have a nice day! 😊"]
CLOSINGS_ANGRY = ["Regards,", "Waiting for your answer.", "Fix it.", "I expect a reply today.", ""]
CLOSINGS_NEUTRAL = ["Thanks,", "Regards,", "Best,", "Thank you,"]

# A few complete tickets in other languages (subject, body, product, priority).
FOREIGN = [
    ("No puedo iniciar sesión",
     "Hola, desde el {date} no puedo iniciar sesión en Cloud Suite. Me aparece el error \"{code}: sesión no válida\". "
     "Ya borré las cookies y probé con otro navegador, pero sigue igual. Necesito acceder hoy porque tengo "
     "que enviar unos documentos a un cliente. ¿Pueden revisar mi cuenta? Muchas gracias, {name}",
     "Cloud Suite", "high"),
    ("Cobro duplicado",
     "Buenas tardes. En mi tarjeta terminada en {card} aparecen dos cargos de {amount} USD del {date}. "
     "Solo tengo una suscripción al plan {plan}. Por favor, devuelvan el cargo duplicado lo antes posible "
     "y confírmenme por correo cuando esté hecho. Saludos, {name}",
     "Billing", "high"),
    ("Router verliert ständig die Verbindung",
     "Hallo, mein {router} verliert seit dem Firmware-Update auf {fw} mehrmals täglich die WLAN-Verbindung. "
     "Kabelgebundene Geräte funktionieren weiterhin. Ich habe den Router bereits neu gestartet und auf "
     "Werkseinstellungen zurückgesetzt, leider ohne Erfolg. Ich arbeite im Homeoffice und bin auf eine "
     "stabile Verbindung angewiesen. Gibt es ein Update oder sollte ich das Gerät einschicken? "
     "Mit freundlichen Grüßen, {name}",
     "Router RX", "normal"),
    ("Rechnung mit falscher Adresse",
     "Guten Tag, auf der Rechnung {invoice} steht noch unsere alte Firmenadresse. Wir sind am {date} "
     "umgezogen und haben die Adresse in den Einstellungen sofort geändert. Bitte stellen Sie uns eine "
     "korrigierte Rechnung aus, damit unsere Buchhaltung den Monat abschließen kann. Vielen Dank, {name}",
     "Billing", "low"),
    ("Fichiers disparus après la synchronisation",
     "Bonjour, après la synchronisation de ce matin, le dossier {folder} est vide sur mon ordinateur et "
     "sur le site web. Il contenait environ {files} fichiers de nos clients. Je n'ai rien supprimé. "
     "La corbeille ne contient presque rien. Pouvez-vous restaurer ces fichiers depuis vos sauvegardes ? "
     "C'est très urgent pour nous. Cordialement, {name}",
     "Sync", "urgent"),
    ("L'application plante au démarrage",
     "Bonjour, depuis la mise à jour {appver}, l'application Kestrel se ferme immédiatement sur mon "
     "{device}. J'ai déjà réinstallé l'application et redémarré le téléphone, sans succès. J'en ai besoin "
     "pour scanner mes reçus pendant mes déplacements. Y a-t-il une solution ? Merci d'avance, {name}",
     "Mobile App", "normal"),
    ("請求書の再発行について",
     "お世話になっております。請求書 {invoice} の宛名が個人名になっていますが、会社名「{company}」で再発行していただけますでしょうか。"
     "経理処理の都合上、今月末までに必要です。請求金額 {amount} ドル自体に問題はありません。"
     "お手数をおかけしますが、よろしくお願いいたします。 {name}",
     "Billing", "normal"),
    ("同期エラー E1042 が表示されます",
     "こんにちは。昨日のアップデート以降、Kestrel Sync で「Error E1042: upload session timed out」というエラーが何度も表示され、"
     "フォルダ {folder} の同期が終わりません。アプリの再起動と再インストールは試しましたが改善しません。"
     "チームの {n} 人が同じフォルダを使っているので困っています。対処方法を教えてください。 {name}",
     "Sync", "high"),
]


def fill(template, s, name):
    return template.format(name=name, **s)


def word_count(text):
    return len(text.split())


BACKGROUND = ["We've been using Kestrel products for about {n} years and have generally been happy.",
              "I'm writing on behalf of {company}, where I handle IT on top of my regular job.",
              "Some context: we are a small team and nobody here is a technical expert.",
              "I'm the administrator for our workspace of {seats} users.",
              "I already contacted you through the chat widget, but the conversation was closed without a solution.",
              "I'm not very technical, so please bear with me."]
FOLLOWUPS = ["If you need screenshots or log files, just tell me and I'll send them.",
             "You can reach me by phone during office hours if that's easier.",
             "Please reply to this email rather than opening a new ticket.",
             "I'm available all afternoon if you want to do a screen share."]


def pick_tone(rng, priority, calm=False):
    if calm:
        return rng.choice(["polite", "polite", "neutral"])
    if priority == "urgent":
        return rng.choice(["urgent", "urgent", "angry"])
    if priority == "high":
        return rng.choice(["neutral", "angry", "urgent"])
    if priority == "low":
        return rng.choice(["polite", "polite", "neutral"])
    return rng.choice(["polite", "neutral", "neutral", "angry"])


def lower_first(sentence):
    """Lower-case a sentence's first letter to continue a lead-in ("So far i ..." stays "I")."""
    first = sentence.split(" ", 1)[0]
    if first == "I" or first.startswith("I'"):
        return sentence
    return sentence[0].lower() + sentence[1:]


def compose(rng, issue, variant, s, name, priority):
    """One ticket body in English: greeting, opening, details, tried, impact, request, sign-off."""
    tone = pick_tone(rng, priority, calm=issue.get("calm", False))
    parts = []
    greeting = rng.choice(GREETINGS)
    if tone == "angry" and rng.random() < 0.6:
        greeting = ""
    opening = fill(variant[1], s, name)
    details = [fill(d, s, name) for d in rng.sample(issue["details"], min(len(issue["details"]), rng.randint(2, 5)))]
    background = fill(rng.choice(BACKGROUND), s, name) if rng.random() < 0.3 else None
    followup = fill(rng.choice(FOLLOWUPS), s, name) if rng.random() < 0.3 else None
    tried = [fill(t, s, name) for t in rng.sample(issue["tried"], min(len(issue["tried"]), rng.randint(0, 2)))]
    impact = {"polite": POLITE_IMPACT, "neutral": NEUTRAL_IMPACT, "angry": ANGRY_IMPACT,
              "urgent": URGENT_IMPACT}[tone]
    impacts = rng.sample(impact, rng.randint(1, 2))
    request = fill(rng.choice(issue["requests"]), s, name)
    closing = rng.choice({"polite": CLOSINGS_POLITE, "neutral": CLOSINGS_NEUTRAL,
                          "angry": CLOSINGS_ANGRY, "urgent": CLOSINGS_NEUTRAL + CLOSINGS_ANGRY}[tone])
    signature = name
    if rng.random() < 0.3:
        signature += ", " + s["company"]

    def render(details, tried, impacts):
        body_sents = ([background] if background else []) + [opening] + details
        if tried:
            body_sents.append(rng_tried_lead + " " + " ".join(lower_first(t) if lead_lower else t for t in tried))
        body_sents += impacts + [request] + ([followup] if followup else [])
        text = " ".join(body_sents)
        paragraphs = ([greeting] if greeting else []) + [text] + ([closing + " " + signature if closing else signature])
        return "\n\n".join(paragraphs) if multi_paragraph else " ".join(paragraphs)

    rng_tried_lead, lead_lower = rng.choice([("What I already tried:", False), ("So far", True),
                                            ("I should add that", True), ("Things I've done:", False)])
    multi_paragraph = rng.random() < 0.5
    body = render(details, tried, impacts)
    # keep within [MIN_WORDS, MAX_WORDS]: add remaining details or drop extras
    spare = [fill(d, s, name) for d in issue["details"] if fill(d, s, name) not in details]
    while word_count(body) < MIN_WORDS and spare:
        details.append(spare.pop(0))
        body = render(details, tried, impacts)
    extra_impacts = [x for x in impact if x not in impacts]
    while word_count(body) < MIN_WORDS and extra_impacts:
        impacts.append(extra_impacts.pop(0))
        body = render(details, tried, impacts)
    while word_count(body) > MAX_WORDS and len(details) > 1:
        details.pop()
        body = render(details, tried, impacts)
    if tone == "angry" and rng.random() < 0.25:
        body = body.replace(request, request.upper(), 1)
    return body


def generate():
    rng = random.Random(SEED)
    issue_names = sorted(ISSUES)
    prio_names = ["low", "normal", "high", "urgent"]
    rows = []
    foreign_slots = set(rng.sample(range(N_TICKETS), len(FOREIGN)))
    foreign_iter = iter(FOREIGN)
    for i in range(N_TICKETS):
        s = slots(rng)
        name = "%s %s" % (rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES))
        if rng.random() < 0.4:
            name = name.split()[0]
        if i in foreign_slots:
            subject, body, product, priority = next(foreign_iter)
            subject = fill(subject, s, name)
            body = fill(body, s, name)
        else:
            key = issue_names[rng.randrange(len(issue_names))]
            issue = ISSUES[key]
            priority = rng.choices(prio_names, weights=issue["prio"])[0]
            variant = rng.choice(issue["variants"])
            if variant[0] and rng.random() < 0.7:
                subject = fill(rng.choice(variant[0]), s, name)
            else:
                subject = fill(rng.choice(issue["subjects"]), s, name)
            if priority == "urgent" and rng.random() < 0.4:
                subject = rng.choice(["URGENT: ", "Urgent - ", "[URGENT] "]) + subject
            body = compose(rng, issue, variant, s, name, priority)
            product = issue["product"]
        rows.append({"id": i + 1, "subject": subject, "body": body, "product": product,
                     "priority": priority})
    return rows


def check(rows, text):
    """Round-trip the CSV text and verify the invariants the demo relies on."""
    back = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(back) == N_TICKETS, len(back)
    for want, got in zip(rows, back):
        assert {k: str(v) for k, v in want.items()} == got, (want, got)
        n = word_count(got["body"])
        # CJK bodies have few whitespace-separated words; count characters instead
        cjk = sum(1 for ch in got["body"] if ord(ch) > 0x3000)
        if cjk > 50:
            assert 80 <= cjk + n <= 400, (got["id"], cjk, n)
        else:
            assert MIN_WORDS <= n <= MAX_WORDS, (got["id"], n)
        assert got["priority"] in ("low", "normal", "high", "urgent")
        assert got["subject"] and "\n" not in got["subject"]
    assert len({r["body"] for r in back}) == N_TICKETS, "duplicate bodies"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "tickets.csv")
    rows = generate()
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=["id", "subject", "body", "product", "priority"],
                       lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writeheader()
    w.writerows(rows)
    text = buf.getvalue()
    check(rows, text)
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    words = [word_count(r["body"]) for r in rows]
    print("wrote %s: %d tickets, body words min %d max %d mean %.0f" %
          (out, len(rows), min(words), max(words), sum(words) / len(words)), file=sys.stderr)


if __name__ == "__main__":
    main()
