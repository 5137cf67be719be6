// StenoSpeech
