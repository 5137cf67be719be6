// `/v1/models`: the models a server has, as the router answers it.

import StenoCore

extension Router {
    /// `/v1/models`: every model the server has, the default first, with what it was loaded from.
    func modelsDocument() -> [UInt8] {
        var w = JSONWriter(capacity: 512)
        w.beginObject()
        w.key("models")
        w.beginArray()
        for (index, model) in context.engine.models.enumerated() {
            w.beginObject()
            w.field("name", model.info.model)
            w.field("language", model.info.language)
            w.key("languages")
            w.beginArray()
            for language in model.languages { w.string(language) }
            w.endArray()
            w.field("sampleRate", integer: model.info.sampleRate)
            w.field("engine", model.info.name)
            w.field("version", model.info.version)
            w.field("default", index == 0)
            w.key("loadedFrom")
            w.beginObject()
            for source in model.sources { w.field(source.name, source.path) }
            w.endObject()
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }
}
