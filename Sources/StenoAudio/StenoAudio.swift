// StenoAudio
