// The profanity filter's word list: English swear words and slurs that captions mask by
// default, with their common inflections (lowercase letters). Kept short on purpose: words
// with an innocent everyday sense ("hell", "damn", "ass", "bloody", "cock", "dick", "prick",
// "fag", "chink") are not in it, so that filtered captions never hide ordinary speech.
// Add words here; tests check that each entry is lowercase letters.

enum ProfanityWords {
    static let list: Set<String> = [
        "fuck", "fucks", "fucked", "fucker", "fuckers", "fucking", "fuckin", "motherfucker",
        "motherfuckers", "motherfucking", "fuckhead", "fuckwit", "clusterfuck",
        "shit", "shits", "shitty", "shitting", "shitted", "bullshit", "horseshit", "shithead", "shitload",
        "bitch", "bitches", "bitching", "bitchy",
        "cunt", "cunts", "twat", "twats",
        "cocksucker", "cocksuckers", "dickhead", "dickheads", "asshole", "assholes", "arsehole", "arseholes",
        "bastard", "bastards", "wanker", "wankers", "bollocks",
        "slut", "sluts", "whore", "whores",
        "nigger", "niggers", "nigga", "niggas", "faggot", "faggots", "spic", "spics", "kike", "kikes",
    ]
}
