#!/bin/sh
# Records what the batch CLI, pocketsphinx_continuous -infile, says about each test file:
# the StenoSpeech tests check that the streaming recognizer finds the same words.
# Run from this directory after the pocketsphinx or pocketsphinx-en-us package changes:
#   sh regenerate-cli-expected.sh > cli-expected.txt
# Format: file, a tab, then the utterances the CLI printed, separated by " | ".
# With "times" as argument it prints the CLI's word segments (-time yes) for beckett.wav
# instead: word, start, end, posterior (sh regenerate-cli-expected.sh times > cli-times.txt).
set -e
M=${STENO_PS_MODEL:-/usr/share/pocketsphinx/model/en-us}
if [ "$1" = times ]; then
    pocketsphinx_continuous -infile beckett.wav -hmm "$M/en-us" -lm "$M/en-us.lm.bin" \
        -dict "$M/cmudict-en-us.dict" -logfn /dev/null -time yes | grep ' [0-9.]* [0-9.]* [0-9.]*$'
    exit 0
fi
echo "# pocketsphinx_continuous -infile FILE -hmm $M/en-us -lm $M/en-us.lm.bin -dict $M/cmudict-en-us.dict"
echo "# $(dpkg-query -W -f='${Package} ${Version}' pocketsphinx 2>/dev/null), $(dpkg-query -W -f='${Package} ${Version}' pocketsphinx-en-us 2>/dev/null)"
for f in librivox/*.wav cards/*.wav beckett.wav; do
    out=$(pocketsphinx_continuous -infile "$f" -hmm "$M/en-us" -lm "$M/en-us.lm.bin" \
          -dict "$M/cmudict-en-us.dict" -logfn /dev/null | sed '/^$/d' | paste -sd'|' | sed 's/|/ | /g')
    printf '%s\t%s\n' "$f" "$out"
done
